// common.cuh - types, conversions and the affine rounding rules shared by every kernel.
// Self-contained on purpose: NVRTC sees no CUDA headers on a user's machine. The host
// prepends a prelude of #defines that specializes this file (see baracuda_quant.h,
// "kernel specialization"). Its values are the names of the public enums' values, which it
// defines first (BQ_TYPE_F32, BQ_GRAN_TOKEN, BQ_OP_QUANTIZE, ...):
//   BQ_FT   float type T: BQ_TYPE_F32, BQ_TYPE_F64, BQ_TYPE_F16 or BQ_TYPE_BF16
//   BQ_IT   storage type I: BQ_TYPE_S8, BQ_TYPE_U8, or FP8: BQ_TYPE_E4M3, BQ_TYPE_E5M2
//   BQ_QMIN, BQ_QMAX   the q-range (integer types; 0 and 0 for FP8)
//   BQ_ST   scale array element type: BQ_TYPE_F32, T or BQ_TYPE_UE8M0
//   BQ_SL   the per-group scales' layout: BQ_SL_ROWS, BQ_SL_MN or BQ_SL_MN_X4 (bq_pbase)
//   BQ_E_<NAME>  the entry points this source compiles (bq_affine_lean: BQ_E_AFFINE_LEAN): the
//           host compiles a module for each entry point alone, so every kernel file
//           wraps each of its entry points in #if BQ_E_<NAME>
// Numerics: docs/numerics.md in the repository. Every rounding is explicit
// (__fdiv_rn, __fmul_rn, ...), so no compiler option can change a result.

#include "abi.h" // bq_u8 .. bq_u64, bq_fastdiv: the host compiles the same definitions

// Per group and per block, scales (and zero points) form a matrix of parameter rows (a row
// of data per group; per block, B rows) by blocks along the row. Its layout, BQ_SL:
//   BQ_SL_ROWS   [prow][b] at prow ld + b (packed UE8M0 rows too: the host gives ld in bytes)
//   BQ_SL_MN     [b][prow] at b ld + prow
//   BQ_SL_MN_X4  UE8M0 bytes packed four to a word along b, words MN-major: byte
//                (b / 4) ld + 4 prow + b % 4, ld in bytes
//   BQ_SL_ROWS_X4  packed, row-major: BQ_SL_ROWS's bytes (dynamic quantize zeroes a row's
//                bytes past its last group)
// bq_pbase gives a parameter row's part of the index, bq_pat adds block b's.
#define BQ_SL_ROWS 0
#define BQ_SL_MN 1
#define BQ_SL_MN_X4 2
#define BQ_SL_ROWS_X4 3
#define BQ_GROUPED (BQ_GRAN == BQ_GRAN_GROUP || BQ_GRAN == BQ_GRAN_BLOCK)
static __device__ __forceinline__ bq_i64 bq_pbase(bq_i64 prow, bq_i64 ld) {
#if BQ_SL == BQ_SL_ROWS || BQ_SL == BQ_SL_ROWS_X4
  return prow * ld;
#elif BQ_SL == BQ_SL_MN
  (void)ld;
  return prow;
#else
  (void)ld;
  return 4 * prow;
#endif
}
static __device__ __forceinline__ bq_i64 bq_pat(bq_i64 base, bq_i64 b, bq_i64 ld) {
#if BQ_SL == BQ_SL_ROWS || BQ_SL == BQ_SL_ROWS_X4
  (void)ld;
  return base + b;
#elif BQ_SL == BQ_SL_MN
  return b * ld + base;
#else
  return (b >> 2) * ld + base + (b & 3);
#endif
}

#if BQ_FT == BQ_TYPE_F64
typedef double bq_c; // compute type C
#else
typedef float bq_c;
#endif

#if BQ_FT == BQ_TYPE_F32
typedef float bq_t;
#elif BQ_FT == BQ_TYPE_F64
typedef double bq_t;
#else
typedef bq_u16 bq_t; // f16 / bf16 bits
#endif

#if BQ_IT == BQ_TYPE_E4M3 || BQ_IT == BQ_TYPE_E5M2
// FP8 storage: bq_i holds the code. The ints the element functions pass around are codes
// (0..255), so the int type's packing and saturation never change one.
#define BQ_FP8 1
typedef unsigned char bq_i;
#define BQ_I_MIN 0
#define BQ_I_MAX 255
#elif BQ_IT == BQ_TYPE_S8
#define BQ_FP8 0
typedef signed char bq_i;
#define BQ_I_MIN (-128)
#define BQ_I_MAX 127
#else
#define BQ_FP8 0
typedef unsigned char bq_i;
#define BQ_I_MIN 0
#define BQ_I_MAX 255
#endif

#if BQ_ST == BQ_TYPE_F32
typedef float bq_s; // scale array element
#elif BQ_ST == BQ_TYPE_UE8M0
typedef bq_u8 bq_s; // a power of two 2^(e - 127) as its biased exponent e; 255 is NaN
#else
typedef bq_t bq_s;
#endif

// The PTX conversions. (A host emulator that runs these sources on the CPU for tests
// defines BQ_EMULATED and supplies its own; NVRTC never sees it.)
#ifndef BQ_EMULATED
static __device__ __forceinline__ float bq_f16_to_f32(bq_u16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
static __device__ __forceinline__ bq_u16 bq_f32_to_f16(float f) {
  bq_u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
static __device__ __forceinline__ bq_u16 bq_f32_to_bf16(float f) {
  bq_u16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
// rne(v) saturated to the int type's range [BQ_I_MIN, BQ_I_MAX], NaN -> 0: one conversion
// (a float to integer cvt clamps to its destination type; the narrow result is extended
// to 32 bits)
static __device__ __forceinline__ int bq_cvt_sat(float v) {
  int r;
#if BQ_IT == BQ_TYPE_S8
  asm("cvt.rni.s8.f32 %0, %1;" : "=r"(r) : "f"(v));
#else
  asm("cvt.rni.u8.f32 %0, %1;" : "=r"(r) : "f"(v));
#endif
  return r;
}
// rne(v) saturated to [-32768, 32767], NaN -> 0
static __device__ __forceinline__ int bq_cvt_s16(float v) {
  int r;
  asm("cvt.rni.s16.f32 %0, %1;" : "=r"(r) : "f"(v));
  return r;
}
// Four ints, each saturated to the int type's range, packed into a word (e0 in the low
// byte): two instructions. (cvt.pack.sat puts its two values in the low half-word, b
// first, and the third operand's low half above them.)
static __device__ __forceinline__ bq_u32 bq_pack4(int e0, int e1, int e2, int e3) {
  bq_u32 hi, w;
#if BQ_FP8 // codes: no saturation
  w = (bq_u32)e0 | ((bq_u32)e1 << 8) | ((bq_u32)e2 << 16) | ((bq_u32)e3 << 24);
  (void)hi;
#elif BQ_IT == BQ_TYPE_S8
  asm("cvt.pack.sat.s8.s32.b32 %0, %1, %2, 0;" : "=r"(hi) : "r"(e3), "r"(e2));
  asm("cvt.pack.sat.s8.s32.b32 %0, %1, %2, %3;" : "=r"(w) : "r"(e1), "r"(e0), "r"(hi));
#else
  asm("cvt.pack.sat.u8.s32.b32 %0, %1, %2, 0;" : "=r"(hi) : "r"(e3), "r"(e2));
  asm("cvt.pack.sat.u8.s32.b32 %0, %1, %2, %3;" : "=r"(w) : "r"(e1), "r"(e0), "r"(hi));
#endif
  return w;
}
#endif
static __device__ __forceinline__ float bq_bf16_to_f32(bq_u16 h) {
  return __uint_as_float(((bq_u32)h) << 16);
}

// T <-> C. T -> C is exact; C -> T rounds to nearest even.
static __device__ __forceinline__ bq_c bq_to_c(bq_t v) {
#if BQ_FT == BQ_TYPE_F16
  return bq_f16_to_f32(v);
#elif BQ_FT == BQ_TYPE_BF16
  return bq_bf16_to_f32(v);
#else
  return v;
#endif
}
static __device__ __forceinline__ bq_t bq_from_c(bq_c v) {
#if BQ_FT == BQ_TYPE_F16
  return bq_f32_to_f16(v);
#elif BQ_FT == BQ_TYPE_BF16
  return bq_f32_to_bf16(v);
#else
  return v;
#endif
}
static __device__ __forceinline__ bq_c bq_scale_to_c(bq_s v) {
#if BQ_ST == BQ_TYPE_F32
  return v;
#elif BQ_ST == BQ_TYPE_UE8M0
  // exact: e in [1, 254] is a normal f32's exponent field, e = 0 the subnormal 2^-127
  const float f = v == 0 ? 0x1p-127f : __uint_as_float((bq_u32)v << 23);
  return (bq_c)(v == 255 ? __uint_as_float(0x7fffffffu) : f);
#else
  return bq_to_c(v);
#endif
}

#if BQ_FT == BQ_TYPE_F64
static __device__ __forceinline__ bq_c bq_div(bq_c a, bq_c b) { return __ddiv_rn(a, b); }
static __device__ __forceinline__ bq_c bq_mul(bq_c a, bq_c b) { return __dmul_rn(a, b); }
static __device__ __forceinline__ bq_c bq_add(bq_c a, bq_c b) { return __dadd_rn(a, b); }
static __device__ __forceinline__ bq_c bq_sub(bq_c a, bq_c b) { return __dsub_rn(a, b); }
static __device__ __forceinline__ bq_c bq_fma(bq_c a, bq_c b, bq_c c) { return __fma_rn(a, b, c); }
static __device__ __forceinline__ bq_c bq_rcp(bq_c a) { return __drcp_rn(a); }
// scales outside [BQ_RCP_LO, BQ_RCP_HI] are brought inside by BQ_RCP_UP or BQ_RCP_DOWN
#define BQ_RCP_LO 0x1p-500
#define BQ_RCP_HI 0x1p500
#define BQ_RCP_UP 0x1p600
#define BQ_RCP_DOWN 0x1p-600
#define BQ_C_MAX 0x1.fffffffffffffp1023
static __device__ __forceinline__ bq_i64 bq_rne_ll(bq_c v) { return __double2ll_rn(v); }
// saturating; NaN -> 0 (the conversion itself gives INT_MIN for a NaN double on sm_90)
static __device__ __forceinline__ int bq_rne_int(bq_c v) { return v == v ? __double2int_rn(v) : 0; }
static __device__ __forceinline__ int bq_to_int_rz(bq_c v) { return __double2int_rz(v); }
static __device__ __forceinline__ bq_c bq_rint(bq_c v) { return rint(v); }
static __device__ __forceinline__ bq_c bq_from_ll(bq_i64 v) { return __ll2double_rn(v); }
static __device__ __forceinline__ bq_c bq_min(bq_c a, bq_c b) { return fmin(a, b); }
static __device__ __forceinline__ bq_c bq_max(bq_c a, bq_c b) { return fmax(a, b); }
static __device__ __forceinline__ bq_c bq_abs(bq_c a) { return fabs(a); }
#define BQ_CLAMP_BIG 0x1p40
#else
static __device__ __forceinline__ bq_c bq_div(bq_c a, bq_c b) { return __fdiv_rn(a, b); }
static __device__ __forceinline__ bq_c bq_mul(bq_c a, bq_c b) { return __fmul_rn(a, b); }
static __device__ __forceinline__ bq_c bq_add(bq_c a, bq_c b) { return __fadd_rn(a, b); }
static __device__ __forceinline__ bq_c bq_sub(bq_c a, bq_c b) { return __fsub_rn(a, b); }
static __device__ __forceinline__ bq_c bq_fma(bq_c a, bq_c b, bq_c c) { return __fmaf_rn(a, b, c); }
static __device__ __forceinline__ bq_c bq_rcp(bq_c a) { return __frcp_rn(a); }
#define BQ_RCP_LO 0x1p-90f
#define BQ_RCP_HI 0x1p90f
#define BQ_RCP_UP 0x1p64f
#define BQ_RCP_DOWN 0x1p-64f
#define BQ_C_MAX 0x1.fffffep127f
static __device__ __forceinline__ bq_i64 bq_rne_ll(bq_c v) { return __float2ll_rn(v); }
static __device__ __forceinline__ int bq_rne_int(bq_c v) { return __float2int_rn(v); } // saturating, NaN -> 0
static __device__ __forceinline__ int bq_to_int_rz(bq_c v) { return __float2int_rz(v); }
static __device__ __forceinline__ bq_c bq_rint(bq_c v) { return rintf(v); }
static __device__ __forceinline__ bq_c bq_from_ll(bq_i64 v) { return __ll2float_rn(v); }
static __device__ __forceinline__ bq_c bq_min(bq_c a, bq_c b) { return fminf(a, b); }
static __device__ __forceinline__ bq_c bq_max(bq_c a, bq_c b) { return fmaxf(a, b); }
static __device__ __forceinline__ bq_c bq_abs(bq_c a) { return fabsf(a); }
#define BQ_CLAMP_BIG 0x1p40f
#endif

// rne(v) as an integer with NaN -> 0, clamped to +-2^40 so that adding any int32 zero
// point can neither wrap nor change which side of the q-range the result falls on.
static __device__ __forceinline__ bq_i64 bq_round(bq_c v) {
  v = (v == v) ? v : (bq_c)0;
  v = v < -BQ_CLAMP_BIG ? -BQ_CLAMP_BIG : (v > BQ_CLAMP_BIG ? BQ_CLAMP_BIG : v);
  return bq_rne_ll(v);
}

// One zero point, prepared once per tensor, row or group so that no element needs 64-bit
// arithmetic whatever the int32 zero point:
// - quantize: q = sat(R + zp, qmin, qmax) with R = rne(x / s) is qmin for R < a = qmin - zp,
//   qmax for R > b = qmax - zp, else R + zp. With lo = a rounded up to C and hi = b rounded
//   down (exact for f64 and for |zp| < 2^24) the comparisons on the integer-valued R give
//   the same answers, and inside [lo, hi] R + zp = base + (R - lo), R - lo exact (Sterbenz),
//   base = qmin + (lo - a).
// - dequantize: q - zp = (q - zp_lo) - zp_hi with zp_hi = C(zp) and zp_lo = zp - zp_hi, a
//   small integer: one exact conversion, then a single rounding in C.
// - fake quantize: q - zp is R itself inside the range, else a or b rounded once to C.
// - quantize, the usual case (ia = a and ib = b both fit in int32, i.e. zp is not within
//   the q-range's width of an int32 limit): q = min(max(R, ia), ib) + zp in int32, with R
//   from the saturating conversion (NaN -> 0), which cannot move R across ia or ib.
#define BQ_NEAR_ZP 32000 // zero points bq_quantize_near takes
struct bq_zp {
  bq_c lo, hi, a, b, zp_hi;
  int base, zp_lo;
  int ia, ib, zp;
  bool iok, near; // near: |zp| <= BQ_NEAR_ZP
};
static __device__ __forceinline__ bq_zp bq_zp_of(int zp) {
  bq_zp z;
  const bq_i64 a = (bq_i64)BQ_QMIN - zp, b = (bq_i64)BQ_QMAX - zp;
  z.iok = a >= -(bq_i64)0x80000000LL && b <= (bq_i64)0x7fffffffLL;
  z.ia = (int)a;
  z.ib = (int)b;
  z.zp = zp;
  z.near = zp >= -BQ_NEAR_ZP && zp <= BQ_NEAR_ZP;
#if BQ_FT == BQ_TYPE_F64
  z.lo = z.a = (double)a;
  z.hi = z.b = (double)b;
  z.base = BQ_QMIN;
  z.zp_hi = (double)zp;
  z.zp_lo = 0;
#else
  if (zp > -(1 << 24) && zp < (1 << 24)) { // everything exact in 32 bits: the usual case
    z.lo = z.a = (float)(BQ_QMIN - zp);
    z.hi = z.b = (float)(BQ_QMAX - zp);
    z.base = BQ_QMIN;
    z.zp_hi = (float)zp;
    z.zp_lo = 0;
  } else {
    z.lo = __ll2float_ru(a);
    z.hi = __ll2float_rd(b);
    z.a = __ll2float_rn(a);
    z.b = __ll2float_rn(b);
    z.base = BQ_QMIN + (int)((bq_i64)z.lo - a);
    z.zp_hi = __int2float_rn(zp);
    z.zp_lo = (int)((bq_i64)zp - (bq_i64)z.zp_hi);
  }
#endif
  return z;
}

// A scale, prepared once per tensor, row or group. Quantizing needs rne(x / s), not x / s
// itself, so the division becomes two products and two FMAs: with s' = s m and x' = x m
// (m a power of two that brings |s'| into [BQ_RCP_LO, BQ_RCP_HI], exact) and
// rcp = RN(1 / s'), Markstein's correction q1 = q0 + (x' - q0 s') rcp, q0 = x' rcp, is
// RN(x / s) whenever it can round to a nonzero integer; smaller quotients round to 0
// either way, and past 2^100 (or for s = 0, inf, NaN) q0 itself is used, which only has to
// saturate or be NaN like x / s. Checked against IEEE division on 2.5e9 quotients: random
// bit patterns, special scales, and values within a few ulps of half-integers.
struct bq_scale {
  bq_c s;          // the scale
  bq_c ss, rcp, m; // the scaled scale, its reciprocal, the power of two
  bool corr;       // apply the correction (s finite and nonzero)
  bool plain;      // m == 1 and corr: bq_quantize_near applies
#if BQ_FT != BQ_TYPE_F64
  float dlo, dhi; // bq_div_near's window for |dy|
#endif
};
// bq_div_near's window for |dy|, from a = |s|
static __device__ __forceinline__ void bq_scale_window(bq_scale &q, bq_c a) {
#if BQ_FT != BQ_TYPE_F64
  q.dlo = fmaxf(0x1p-96f, __fmul_rn(a, 0x1p-96f));
  q.dhi = fminf(__fmul_rn(a, 0x1p96f), 0x1.fffffep127f); // finite: an infinite dy divides outright
#else
  (void)q, (void)a;
#endif
}
static __device__ __forceinline__ bq_scale bq_scale_of(bq_c s) {
  bq_scale q;
  const bq_c a = bq_abs(s);
  q.s = s;
  q.m = a < BQ_RCP_LO ? BQ_RCP_UP : (a > BQ_RCP_HI && a <= BQ_C_MAX ? BQ_RCP_DOWN : (bq_c)1);
  q.ss = bq_mul(s, q.m);
  q.rcp = bq_rcp(q.ss);
  q.corr = a > (bq_c)0 && a <= BQ_C_MAX;
  q.plain = q.m == (bq_c)1 && q.corr;
  bq_scale_window(q, a);
  return q;
}
// Whether s needs no bracket (m == 1) and its reciprocal corrects (bq_scale_of's plain)
static __device__ __forceinline__ bool bq_scale_is_plain(bq_c s) {
  const bq_c a = bq_abs(s);
  return a >= BQ_RCP_LO && a <= BQ_RCP_HI;
}
// bq_scale_of(s) where bq_scale_is_plain(s), without the bracket's selects and product
static __device__ __forceinline__ bq_scale bq_scale_plain_of(bq_c s) {
  bq_scale q;
  q.s = q.ss = s;
  q.m = (bq_c)1;
  q.rcp = bq_rcp(s);
  q.corr = q.plain = true;
  bq_scale_window(q, bq_abs(s));
  return q;
}
// x / s as far as rne needs it: exact where it matters, NaN where x / s is NaN
static __device__ __forceinline__ bq_c bq_quotient(bq_c x, const bq_scale &q) {
  const bq_c xs = bq_mul(x, q.m);
  const bq_c q0 = bq_mul(xs, q.rcp);
  const bq_c q1 = bq_fma(bq_fma(-q0, q.ss, xs), q.rcp, q0);
  return (q.corr & (bq_abs(q0) < (bq_c)0x1p100f)) ? q1 : q0; // & not &&: no branch
}
// x / s itself, correctly rounded (the quantize backward pass), where `ok` comes back true;
// the caller divides the other elements with bq_div. f32 divides outright. f64 uses the
// prepared reciprocal: with rcp = RN(1 / s) (m == 1: |s| in [2^-500, 2^500]), q0 = RN(x rcp)
// and the exact residual x - q0 s, q0 + (x - q0 s) rcp rounded once is RN(x / s)
// (Markstein) wherever nothing can underflow or overflow, which |x| in [2^-400, 2^401)
// ensures (checked against IEEE division on 2.7e8 such quotients, hard cases included). The
// test reads x's exponent with integer operations; x = +-0 gives q0, exact with its sign.
static __device__ __forceinline__ bq_c bq_div_by(bq_c x, const bq_scale &q, bool &ok) {
#if BQ_FT == BQ_TYPE_F64
  const double q0 = __dmul_rn(x, q.rcp);
  const int hi = __double2hiint(x);
  const bool zero = ((hi & 0x7fffffff) | __double2loint(x)) == 0;
  const bool mid = (unsigned)(((hi >> 20) & 0x7ff) - (1023 - 400)) < 801u;
  ok = q.m == 1.0 && q.corr && (zero || mid);
  return zero ? q0 : __fma_rn(__fma_rn(-q0, q.s, x), q.rcp, q0);
#else
  ok = true;
  return bq_div(x, q.s);
#endif
}
// rne(x / s) with NaN -> 0
static __device__ __forceinline__ bq_c bq_rounded_quotient(bq_c x, const bq_scale &q) {
  const bq_c v = bq_quotient(x, q);
  return bq_rint(v == v ? v : (bq_c)0);
}
#if BQ_FT != BQ_TYPE_F64
// Quantize backward where s.plain, in f32: the STE mask (bq_in_range_near) and
// dy / s, correctly rounded, from the prepared reciprocal (Markstein's correction, as
// bq_div_by does in f64) where |dy| is 0 or in [max(2^-96, |s| 2^-96), min(|s| 2^96, the
// largest finite)] (an infinite dy, whose residual is NaN, is never in it): there the
// residual is exact and nothing underflows or overflows. Outside that window `ok` falls and
// the caller divides. A zero residual keeps q0 (an exact quotient; for dy = -0 the
// correction would give +0). Checked against IEEE division on the host (tests/test_division.c):
// every bf16 and f16 value against random scales, and random f32 quotients, hard cases near
// the window's ends and near multiples of s included.
static __device__ __forceinline__ float bq_div_near(float a, const bq_scale &s, bool &ok) {
  const float q0 = __fmul_rn(a, s.rcp);
  const float r = __fmaf_rn(-q0, s.s, a);
  const float aa = fabsf(a);
  ok &= (aa <= s.dhi) & ((aa >= s.dlo) | (aa == 0.0f)); // & and |: no branch an element
  return r == 0.0f ? q0 : __fmaf_rn(r, s.rcp, q0);
}
#endif

#if BQ_FT != BQ_TYPE_F64
// C(x) / C(s) in f32, exact wherever the FP8 (or E2M1) rounding or the mask can tell, with
// no division, for any scale. With bq_scale's power of two m (|s m| in [2^-90, 2^90]), the
// quotient is (x m) / (s m), and Markstein's correction of (x m) * RN(1 / (s m)) is that
// quotient correctly rounded while |x m| is in bq_div_near's window. Below 2^-96, x m is
// taken up by 2^64 first (exact) and the quotient down again after, which can only round
// results below 2^-126, far under half FP8's smallest subnormal. Where |q0| >= 2^90 the
// quotient saturates whatever its last bits, so q0 (possibly inf) is kept, as it is for a
// zero, infinite or NaN scale (corr false: q0 is then x / s's inf, zero or NaN). What is
// left outside the window are quotients under 2^-96 (a small x m against a large s m, or
// an x m that underflowed): they keep their sign and round to +-0 either way.
// PLAIN: the caller knows s.plain (m == 1, corr), which saves the product by m.
template <bool PLAIN> static __device__ __forceinline__ float bq_f8_quotient_f32(float x, const bq_scale &s) {
  const float xm = PLAIN ? x : __fmul_rn(x, s.m);
  const bool tiny = fabsf(xm) < 0x1p-96f;
  const float xs = tiny ? __fmul_rn(xm, 0x1p64f) : xm;
  const float q0 = __fmul_rn(xs, s.rcp);
  const float r = __fmaf_rn(-q0, s.ss, xs);
  float q1 = r == 0.0f ? q0 : __fmaf_rn(r, s.rcp, q0); // r == 0: q0 is exact (and -0 stays -0)
  q1 = (PLAIN || s.corr) && fabsf(q0) < 0x1p90f ? q1 : q0; // (a NaN q0 makes q1 NaN too)
  return tiny ? __fmul_rn(q1, 0x1p-64f) : q1;
}
#endif
// C(x) / C(s), correctly rounded where the FP8 rounding or the mask can tell: as above in
// f32; in f64 from the reciprocal where bq_div_by's window allows, else by division
static __device__ __forceinline__ bq_c bq_f8_quotient(bq_c x, const bq_scale &s) {
#if BQ_FT == BQ_TYPE_F64
  bool ok;
  const bq_c v = bq_div_by(x, s, ok);
  return ok ? v : bq_div(x, s.s);
#else
  return bq_f8_quotient_f32<false>(x, s);
#endif
}
#if BQ_FP8
// ---- FP8 storage: docs/numerics.md, "FP8 storage" --------------------------------------
// q = fp8(C(x) / C(s)): the IEEE quotient in C, then one round to nearest even into the
// type, saturating to its largest finite value (NaN gives the code 0x7F). Zero points are
// 0 (the host rejects others), so bq_zp only carries them through.
#if BQ_IT == BQ_TYPE_E4M3
#define BQ_F8_M 3          // mantissa bits
#define BQ_F8_BIAS 7
#define BQ_F8_MAX 448.0f
#define BQ_F8_MAX_CODE 0x7E
#else
#define BQ_F8_M 2
#define BQ_F8_BIAS 15
#define BQ_F8_MAX 57344.0f
#define BQ_F8_MAX_CODE 0x7B
#endif
// BQ_F8_HW: the FP8 conversion instructions are there (sm_89 and later, on the GPU, without
// BQ_FP8_SOFT); the forms below without them are the bit-exact software ones.
#if !defined(BQ_EMULATED) && !defined(BQ_FP8_SOFT) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define BQ_F8_HW 1
#else
#define BQ_F8_HW 0
#endif
// f32 -> FP8 code, round to nearest even, satfinite. sm_89 and later have the instruction;
// elsewhere (and in the CPU emulator, or with BQ_FP8_SOFT, which the tests use to check this
// form on an H100) the same rounding from the bits: the significand keeps BQ_F8_M bits
// above the type's quantum at x's exponent (its smallest normal exponent below that).
// Not inlined: one call per element, where a copy in every element of every unrolled
// access made these kernels the slowest to compile (up to a few times slower).
static __device__ __noinline__ int bq_f8_soft(float v) {
  const bq_u32 b = __float_as_uint(v);
  const int sign = (int)((b >> 24) & 0x80u);
  const bq_u32 a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7F;                              // NaN
  if (__uint_as_float(a) >= BQ_F8_MAX) return sign | BQ_F8_MAX_CODE; // saturate (and +-inf)
  const int e = (int)(a >> 23) - 127, emin = 1 - BQ_F8_BIAS;
  if (e < emin - BQ_F8_M - 1) return sign; // below half the smallest subnormal: +-0
  const bq_u32 m = (a & 0x7fffffu) | 0x800000u;
  const int shift = 23 - BQ_F8_M + (e < emin ? emin - e : 0); // at most 24
  const bq_u32 keep = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
  const bq_u32 up = (rem > half) | ((rem == half) & keep);
  // keep counts quanta 2^(max(e, emin) - M); a carry into the next binade lands right
  return sign | (int)(((bq_u32)((e < emin ? emin : e) + BQ_F8_BIAS - 1) << BQ_F8_M) + keep + up);
}
static __device__ __forceinline__ int bq_f8_of_f32(float v) {
#if BQ_F8_HW
  bq_u16 h;
#if BQ_IT == BQ_TYPE_E4M3
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(h) : "f"(0.0f), "f"(v));
#else
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(h) : "f"(0.0f), "f"(v));
#endif
  return h & 0xFF; // the second operand lands in the low byte
#else
  return bq_f8_soft(v);
#endif
}
// Two codes at once, lo's in the low byte (one instruction in hardware)
static __device__ __forceinline__ bq_u32 bq_f8x2_of_f32(float lo, float hi) {
#if BQ_F8_HW
  bq_u16 h;
#if BQ_IT == BQ_TYPE_E4M3
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(h) : "f"(hi), "f"(lo));
#else
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(h) : "f"(hi), "f"(lo));
#endif
  return h;
#else
  return (bq_u32)bq_f8_soft(lo) | (bq_u32)bq_f8_soft(hi) << 8;
#endif
}
// C -> FP8 code, one rounding. An f64 value is first rounded to f32 by round to odd
// (truncate, then set the last bit if anything was dropped), which keeps the FP8 rounding
// single: f32 carries far more than the two extra bits that needs.
static __device__ __forceinline__ int bq_f8_of_c(bq_c v) {
#if BQ_FT == BQ_TYPE_F64
  float f = __double2float_rn(v);
  if ((double)f != v && v == v) {
    bq_u32 u = __float_as_uint(f);
    if (fabs((double)f) > fabs(v)) u -= 1; // rounded away from zero: step back (inf -> max)
    f = __uint_as_float(u | 1u);
  }
  return bq_f8_of_f32(f);
#else
  return bq_f8_of_f32(v);
#endif
}
// FP8 code -> C, exact. sm_89 and later convert in hardware (through f16, which holds every
// FP8 value); elsewhere the magnitude's bits are placed in an f32 and scaled by a power of
// two (subnormal codes become f32 subnormals first, which the product makes normal exactly).
// The two forms differ only in a NaN's sign and payload, which the one caller's product
// with the scale replaces by the canonical NaN.
static __device__ __forceinline__ bq_c bq_f8_to_c(int c) {
#if BQ_F8_HW
  bq_u32 h2;
  float f;
#if BQ_IT == BQ_TYPE_E4M3
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"((bq_u16)(c & 0xff)));
#else
  asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(h2) : "h"((bq_u16)(c & 0xff)));
#endif
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((bq_u16)h2)); // the low byte's value is the low half
  return (bq_c)f;
#else
  const bq_u32 mag = (bq_u32)c & 0x7fu;
#if BQ_IT == BQ_TYPE_E4M3
  float v = __fmul_rn(__uint_as_float(mag << 20), 0x1p120f);
  v = mag == 0x7fu ? __uint_as_float(0x7fffffffu) : v;
#else
  float v = __fmul_rn(__uint_as_float(mag << 21), 0x1p112f);
  v = mag >= 0x7cu ? (mag == 0x7cu ? __uint_as_float(0x7f800000u) : __uint_as_float(0x7fffffffu)) : v;
#endif
  return (bq_c)__uint_as_float(__float_as_uint(v) | (((bq_u32)c & 0x80u) << 24));
#endif
}
// the quantize forms the affine and dynamic kernels call
static __device__ __forceinline__ int bq_quantize_f8(bq_c x, const bq_scale &s) {
  return bq_f8_of_c(bq_f8_quotient(x, s));
}
#if BQ_FT != BQ_TYPE_F64
// the same where the caller knows s.plain
static __device__ __forceinline__ int bq_quantize_f8_plain(float x, const bq_scale &s) {
  return bq_f8_of_f32(bq_f8_quotient_f32<true>(x, s));
}
#endif
static __device__ __forceinline__ int bq_quantize_int(bq_c x, const bq_scale &s, const bq_zp &) {
  return bq_quantize_f8(x, s);
}
static __device__ __forceinline__ int bq_quantize_bounded(bq_c x, const bq_scale &s, const bq_zp &) {
#if BQ_FT == BQ_TYPE_F64
  return bq_quantize_f8(x, s);
#else
  return bq_quantize_f8_plain(x, s); // the caller knows s.plain
#endif
}
static __device__ __forceinline__ int bq_quantize(bq_c x, const bq_scale &s, const bq_zp &) {
  return bq_quantize_f8(x, s);
}
#if BQ_FT != BQ_TYPE_F64
// the forms whose callers know s.plain
static __device__ __forceinline__ int bq_quantize_sym(float x, const bq_scale &s) {
  return bq_quantize_f8_plain(x, s);
}
template <bool GUARD> static __device__ __forceinline__ int bq_near_elem(float v, const bq_scale &s, int) {
  return bq_quantize_f8_plain(v, s);
}
// PAIRS: two codes a conversion, already in their bytes' order (bq_affine_lean and
// bq_affine_pair, where it ran faster; it slowed the kernels that take MN-major scales)
template <bool GUARD, bool PAIRS = false, int N, typename E>
static __device__ __forceinline__ void bq_quantize_near(const E (&x)[N], const bq_scale &s, int, bq_i (&y)[N]) {
#if BQ_F8_HW
  if (PAIRS && N % 2 == 0) {
#pragma unroll
    for (int j = 0; j < N; j += 2) {
      const bq_u32 h = bq_f8x2_of_f32(bq_f8_quotient_f32<true>(bq_to_c(x[j]), s),
                                      bq_f8_quotient_f32<true>(bq_to_c(x[j + 1]), s));
      y[j] = (bq_i)(h & 0xffu);
      y[j + 1] = (bq_i)(h >> 8);
    }
    return;
  }
#endif
#pragma unroll
  for (int j = 0; j < N; j++) y[j] = (bq_i)bq_quantize_f8_plain(bq_to_c(x[j]), s);
}
#endif
// dequantize: C(q) * C(s), one rounding
static __device__ __forceinline__ bq_c bq_dequantize(int q, bq_c s, const bq_zp &) {
  return bq_mul(bq_f8_to_c(q), s);
}
// fake quantize: dequantize(quantize(x)), bit for bit
static __device__ __forceinline__ bq_c bq_fake_quantize(bq_c x, const bq_scale &s, const bq_zp &z) {
  return bq_dequantize(bq_quantize_f8(x, s), s.s, z);
}
static __device__ __forceinline__ bq_c bq_fake_quantize_near(bq_c x, const bq_scale &s, const bq_zp &z) {
#if BQ_FT == BQ_TYPE_F64
  return bq_fake_quantize(x, s, z);
#else
  return bq_dequantize(bq_quantize_f8_plain(x, s), s.s, z); // s.plain
#endif
}
// STE mask: |C(x) / C(s)| <= max, 0 for NaN
static __device__ __forceinline__ bool bq_in_range(bq_c x, const bq_scale &s, const bq_zp &) {
  return bq_abs(bq_f8_quotient(x, s)) <= (bq_c)BQ_F8_MAX;
}
static __device__ __forceinline__ bool bq_in_range_near(bq_c x, const bq_scale &s, const bq_zp &z) {
#if BQ_FT == BQ_TYPE_F64
  return bq_in_range(x, s, z);
#else
  return fabsf(bq_f8_quotient_f32<true>(x, s)) <= BQ_F8_MAX; // s.plain
#endif
}
#else
// quantize: q = sat(rne(x / s) + zp, qmin, qmax)
// (The in-range value is computed for every element and then selected: the conversion
// is the saturating intrinsic, defined for any input, so no branch is needed.)
// The integer form, exact when z.iok: always so for a zero point inside the q-range, like
// every zero point dynamic quantization computes.
static __device__ __forceinline__ int bq_quantize_int(bq_c x, const bq_scale &s, const bq_zp &z) {
  const int r = bq_rne_int(bq_quotient(x, s)); // saturating, NaN -> 0
  return min(max(r, z.ia), z.ib) + z.zp;
}
// bq_quotient for a plain scale (s.m == 1 and s.corr; then ss == s): q0 = x rcp with
// Markstein's correction, without the bracket's products. GUARD keeps q0 where it is past
// 2^100 (an overflowing product, an infinite x), where it only has to saturate or be NaN;
// without it the caller knows |x / s| < 2^100 or x NaN.
template <bool GUARD> static __device__ __forceinline__ bq_c bq_quotient_plain(bq_c x, const bq_scale &s) {
  const bq_c q0 = bq_mul(x, s.rcp);
  const bq_c q1 = bq_fma(bq_fma(-q0, s.ss, x), s.rcp, q0);
  return !GUARD || bq_abs(q0) < (bq_c)0x1p100f ? q1 : q0;
}
// The same where the caller knows more: s.m == 1, s.corr, and |x / s| < 2^100 or x NaN
// (dynamic quantization, whose scale bounds every finite element of its segment). Then
// q0 needs neither the bracket's product nor the guard's compare and select: bit for bit
// bq_quantize_int's result with three operations fewer per element.
static __device__ __forceinline__ int bq_quantize_bounded(bq_c x, const bq_scale &s, const bq_zp &z) {
  const int r = bq_rne_int(bq_quotient_plain<false>(x, s)); // NaN -> 0
  return min(max(r, z.ia), z.ib) + z.zp;
}
#if BQ_FT != BQ_TYPE_F64
// And with zero point 0 (symmetric dynamic quantization) in f32: the conversion to the int
// type rounds half to even, saturates to the type's range and maps NaN to 0 by itself, so
// only q-range bounds inside that range need a clamp: four operations an element.
static __device__ __forceinline__ int bq_quantize_sym(float x, const bq_scale &s) {
  int r = bq_cvt_sat(bq_quotient_plain<false>(x, s));
#if BQ_QMIN > BQ_I_MIN
  r = max(r, BQ_QMIN);
#endif
#if BQ_QMAX < BQ_I_MAX
  r = min(r, BQ_QMAX);
#endif
  return r;
}
// Quantize, the usual case in f32: a scale that needs no power-of-two bracket (bq_scale.plain)
// and a zero point of magnitude up to BQ_NEAR_ZP (bq_zp.near); N elements (a multiple of
// 4) into N / 4 packed words, bit for bit bq_quantize_int's results. rne(x / s) is
// saturated to 16 bits, which cannot change a result for such a zero point: past 2^15 the
// sum stays beyond the q-range on the same side. The guard keeps an overflowing product
// (x / s past 2^100, an infinite x) from turning the correction into NaN; that q0 only
// has to saturate. (GUARD false: the caller knows |x / s| < 2^100 or x NaN, as for
// bq_quantize_bounded.) Per element: a product, two FMAs (the second predicated), a
// compare, the 16-bit conversion, the zero point's add and half of a saturating pack;
// bq_quantize_int takes 11 operations and the compiler's byte packing.
// One element, before the pack's saturation to the int type:
template <bool GUARD> static __device__ __forceinline__ int bq_near_elem(float v, const bq_scale &s, int zp) {
  int t = bq_cvt_s16(bq_quotient_plain<GUARD>(v, s)) + zp;
#if BQ_QMIN > BQ_I_MIN
  t = max(t, BQ_QMIN);
#endif
#if BQ_QMAX < BQ_I_MAX
  t = min(t, BQ_QMAX);
#endif
  return t;
}
// (x: T values, or values already in C)
static __device__ __forceinline__ float bq_widen(float v) { return v; }
#if BQ_FT == BQ_TYPE_F16 || BQ_FT == BQ_TYPE_BF16
static __device__ __forceinline__ float bq_widen(bq_u16 v) { return bq_to_c(v); }
#endif
template <bool GUARD, bool PAIRS = false, int N, typename E>
static __device__ __forceinline__ void bq_quantize_near(const E (&x)[N], const bq_scale &s, int zp, bq_i (&y)[N]) {
  int t[N];
#pragma unroll
  for (int j = 0; j < N; j++) t[j] = bq_near_elem<GUARD>(bq_widen(x[j]), s, zp);
#pragma unroll // (y is a chunk's elements: whole aligned words)
  for (int j = 0; j < N; j += 4) *(bq_u32 *)&y[j] = bq_pack4(t[j], t[j + 1], t[j + 2], t[j + 3]);
}
#endif
// Quantize backward where s.plain: the STE mask, bit for bit bq_in_range's without the
// power-of-two products
static __device__ __forceinline__ bool bq_in_range_near(bq_c x, const bq_scale &s, const bq_zp &z) {
  const bq_c r = bq_rint(bq_quotient_plain<true>(x, s)); // NaN compares false
  return r >= z.lo && r <= z.hi;
}
static __device__ __forceinline__ int bq_quantize(bq_c x, const bq_scale &s, const bq_zp &z) {
  if (z.iok) return bq_quantize_int(x, s, z); // uniform across a tensor, row or group
  const bq_c r = bq_rounded_quotient(x, s);
  const int inside = z.base + bq_to_int_rz(bq_sub(r, z.lo));
  const int below = r < z.lo ? BQ_QMIN : inside;
  return r > z.hi ? BQ_QMAX : below;
}
// dequantize: (q - zp) exact in integer, one rounding to C, one product in C.
static __device__ __forceinline__ bq_c bq_dequantize(int q, bq_c s, const bq_zp &z) {
  return bq_mul(bq_sub((bq_c)(q - z.zp_lo), z.zp_hi), s);
}
// fake quantize: dequantize(quantize(x)), bit for bit
static __device__ __forceinline__ bq_c bq_fake_quantize(bq_c x, const bq_scale &s, const bq_zp &z) {
  const bq_c r = bq_add(bq_rounded_quotient(x, s), (bq_c)0); // + 0 turns -0 into the integer 0
  const bq_c below = r < z.lo ? z.a : r;
  return bq_mul(r > z.hi ? z.b : below, s.s);
}
// The same where s.plain (no power-of-two bracket) and the q-range's ends are exact in C
// (z.lo == z.a, z.hi == z.b: every f64 zero point, |zp| < 2^24 in f32): bit for bit, without
// the bracket's product and the checks it needs
static __device__ __forceinline__ bq_c bq_fake_quantize_near(bq_c x, const bq_scale &s, const bq_zp &z) {
  const bq_c v = bq_quotient_plain<true>(x, s);
  const bq_c r = bq_add(bq_rint(v == v ? v : (bq_c)0), (bq_c)0);
  const bq_c below = r < z.lo ? z.lo : r;
  return bq_mul(r > z.hi ? z.hi : below, s.s);
}
// STE mask: qmin <= rne(x / s) + zp <= qmax, before saturation; 0 for NaN.
static __device__ __forceinline__ bool bq_in_range(bq_c x, const bq_scale &s, const bq_zp &z) {
  const bq_c r = bq_rint(bq_quotient(x, s)); // NaN compares false
  return r >= z.lo && r <= z.hi;
}

#endif // BQ_FP8

// ---- the STE mask as an interval ----------------------------------------------------------
// Where s.plain, bq_in_range_near(x) holds exactly on one interval [lo, hi] of x: it asks the
// quotient RN(x / s), monotone in x, to round into a range. Its ends are found once per
// scale, from the range's ends times s, by asking the mask itself an ulp at a time either
// way; an element then takes two comparisons (NaN fails both). ok is false where s is not
// plain or a search does not settle in its steps: there the caller keeps the mask itself.
struct bq_mask_iv {
  float lo, hi;
  bool ok;
};
static __device__ __forceinline__ bq_mask_iv bq_mask_none() { return bq_mask_iv{0.0f, 0.0f, false}; }
#if BQ_FT != BQ_TYPE_F64
// the float next to x (finite) up (D = 1) or down (D = -1); past the largest finite, infinity
template <int D> static __device__ __forceinline__ float bq_float_step(float x) {
  const int i = __float_as_int(x);
  return x == 0.0f ? (D > 0 ? 0x1p-149f : -0x1p-149f) : __int_as_float(i + (i < 0 ? -D : D));
}
// The interval's end toward D (1: its largest x, -1: its smallest) from a guess g near it
template <int D>
static __device__ __forceinline__ float bq_mask_end(float g, const bq_scale &s, const bq_zp &z, bool &ok) {
  float x = fminf(fmaxf(g, -0x1.fffffep127f), 0x1.fffffep127f);
  bool in = bq_in_range_near(x, s, z), done = in;
#pragma unroll 1
  for (int k = 0; k < 8 && !in; k++) { // outside: back into the interval, whose end it then is
    x = bq_float_step<-D>(x);
    in = bq_in_range_near(x, s, z);
  }
  if (done) { // inside: out to the end
    done = false;
#pragma unroll 1
    for (int k = 0; k < 8 && !done; k++) {
      const float n = bq_float_step<D>(x);
      done = !bq_in_range_near(n, s, z);
      if (!done) x = n;
    }
  } else {
    done = in;
  }
  ok &= done;
  return x;
}
static __device__ __forceinline__ bq_mask_iv bq_mask_iv_of(const bq_scale &s, const bq_zp &z) {
  bq_mask_iv m = bq_mask_none();
  if (s.plain) {
    m.ok = true;
#if BQ_FP8
    m.hi = bq_mask_end<1>(__fmul_rn(BQ_F8_MAX, fabsf(s.s)), s, z, m.ok);
    m.lo = -m.hi; // the mask is even in x
#else
    const float a = __fmul_rn(z.hi + 0.5f, s.s), b = __fmul_rn(z.lo - 0.5f, s.s);
    m.hi = bq_mask_end<1>(s.s > 0.0f ? a : b, s, z, m.ok);
    m.lo = bq_mask_end<-1>(s.s > 0.0f ? b : a, s, z, m.ok);
#endif
  }
  return m;
}
#endif

// 64-bit division, out of line: it is the rare path (indices past 2^31), and one copy of
// its code keeps the compile fast.
static __device__ __noinline__ bq_i64 bq_div64(bq_i64 a, bq_i64 b) { return a / b; }

static __device__ __forceinline__ bq_u32 bq_div_u32(bq_u32 n, bq_fastdiv f) {
  bq_u32 t = __umulhi(n, f.magic);
  return (bq_u32)(((bq_u64)t + n) >> f.shift);
}
// The same for n < 2^31, where t + n stays below 2^32
static __device__ __forceinline__ bq_u32 bq_div_u31(bq_u32 n, bq_fastdiv f) {
  return (__umulhi(n, f.magic) + n) >> f.shift;
}

// ---- vector access -------------------------------------------------------------------
// A chunk is a few elements of one stream held in registers (a power of two bytes). It
// moves with the widest access (16, 8, 4, 2 or 1 bytes) that both its size and the
// stream's alignment allow, so any pointer, stride and length stays on the vector path.
template <typename E, int N> struct alignas(sizeof(E) * N) bq_chunk {
  E e[N];
};

static __device__ __forceinline__ int bq_width(const void *p) {
  bq_u32 a = (bq_u32)(bq_u64)p & 15u;
  return a == 0 ? 16 : (int)(a & (0u - a));
}

// Cache policy: 16-byte accesses stream (ld.cs / st.cs: evict first), narrower ones take the
// default. STREAM8 streams 8-byte loads too; KEEP16 stores 16-byte accesses with the default
// policy, for an output its consumer reads next (bq_affine_lean's dequantize, where the
// wide stream is the output).
// (The CPU emulator checks each access's alignment, which a GPU faults on: BQ_EMU_ALIGNED.)
#ifdef BQ_EMULATED
#define BQ_EMU_ALIGNED(p, n) emu_check_aligned(p, n, "vector access")
#else
#define BQ_EMU_ALIGNED(p, n)
#endif
template <bool STREAM8 = false, typename C>
static __device__ __forceinline__ void bq_load(C &dst, const void *src, int w) {
  w = w < (int)sizeof(C) ? w : (int)sizeof(C);
#define BQ_LOAD_AS(W)                                                                      \
  {                                                                                        \
    const W *s = (const W *)src;                                                           \
    W *d = (W *)&dst;                                                                      \
    BQ_EMU_ALIGNED(s, sizeof(W));                                                          \
    _Pragma("unroll") for (int i = 0; i < (int)(sizeof(C) / sizeof(W)); i++) d[i] = s[i];  \
  }
  if (w == 16) {
    const uint4 *s = (const uint4 *)src;
    uint4 *d = (uint4 *)&dst;
#pragma unroll
    for (int i = 0; i < (int)(sizeof(C) / 16); i++) d[i] = __ldcs(s + i);
  } else if (w == 8 && STREAM8) {
    const uint2 *s = (const uint2 *)src;
    uint2 *d = (uint2 *)&dst;
#pragma unroll
    for (int i = 0; i < (int)(sizeof(C) / 8); i++) d[i] = __ldcs(s + i);
  } else if (w == 8) BQ_LOAD_AS(uint2)
  else if (w == 4) BQ_LOAD_AS(bq_u32)
  else if (w == 2) BQ_LOAD_AS(bq_u16)
  else BQ_LOAD_AS(bq_u8)
#undef BQ_LOAD_AS
}

template <bool KEEP16 = false, typename C>
static __device__ __forceinline__ void bq_store(void *dst, const C &src, int w) {
  w = w < (int)sizeof(C) ? w : (int)sizeof(C);
#define BQ_STORE_AS(W)                                                                     \
  {                                                                                        \
    W *d = (W *)dst;                                                                       \
    const W *s = (const W *)&src;                                                          \
    BQ_EMU_ALIGNED(d, sizeof(W));                                                          \
    _Pragma("unroll") for (int i = 0; i < (int)(sizeof(C) / sizeof(W)); i++) d[i] = s[i];  \
  }
  if (w == 16 && KEEP16) BQ_STORE_AS(uint4)
  else if (w == 16) {
    uint4 *d = (uint4 *)dst;
    const uint4 *s = (const uint4 *)&src;
#pragma unroll
    for (int i = 0; i < (int)(sizeof(C) / 16); i++) __stcs(d + i, s[i]);
  } else if (w == 8) BQ_STORE_AS(uint2)
  else if (w == 4) BQ_STORE_AS(bq_u32)
  else if (w == 2) BQ_STORE_AS(bq_u16)
  else BQ_STORE_AS(bq_u8)
#undef BQ_STORE_AS
}

// Elements before the first 16-byte boundary of p (at most n).
template <typename E> static __device__ __forceinline__ bq_i64 bq_prologue(const E *p, bq_i64 n) {
  bq_i64 k = (bq_i64)(((16u - ((bq_u32)(bq_u64)p & 15u)) & 15u) / sizeof(E));
  return k < n ? k : n;
}

// C -> scale element type, rounding to nearest even. UE8M0 takes a power of two (dynamic
// quantization's with pow2_scales) and stores its exponent, clamped to [2^-127, 2^127];
// inf and NaN store 255 (NaN).
static __device__ __forceinline__ bq_s bq_scale_from_c(bq_c v) {
#if BQ_ST == BQ_TYPE_UE8M0
#if BQ_FT == BQ_TYPE_F64
  const int k = (int)((__double_as_longlong(v) >> 52) & 0x7ff) - 1023; // v > 0: its exponent (subnormal: -1023)
  const bool special = !(v <= 0x1.fffffffffffffp1023);
#else
  const int k = (int)((__float_as_uint(v) >> 23) & 0xff) - 127;
  const bool special = !(v <= 0x1.fffffep127f);
#endif
  const int e = k + 127 < 0 ? 0 : (k + 127 > 254 ? 254 : k + 127);
  return (bq_s)(special ? 255 : e);
#elif BQ_ST == BQ_TYPE_F32 && BQ_FT == BQ_TYPE_F64
  return __double2float_rn(v);
#elif BQ_ST == BQ_TYPE_F32
  return v;
#else
  return bq_from_c(v);
#endif
}

// ---- teams ----------------------------------------------------------------------------
// A team is tpr threads working on one row: a warp (tpr == 32; a block holds several,
// independent of each other) or a whole block (tpr >= 64). So a team synchronizes with
// __syncwarp or __syncthreads, and blocks of different rows never wait for each other.
static __device__ __forceinline__ void bq_team_sync(int tpr) {
  if (tpr > 32) __syncthreads();
  else __syncwarp();
}

// ---- dynamic shared memory and cp.async ------------------------------------------------
// 16-byte copies from global to shared memory through L2 (cp.async.cg, sm_80 and up),
// committed and waited on by group: the linear layers' pipelines and the fused family's
// activation table and staged rows. (The CPU emulator supplies host versions.)
#ifndef BQ_EMULATED
#define BQ_DYNAMIC_SMEM(name) extern __shared__ __align__(128) unsigned char name[]
static __device__ __forceinline__ void bq_cp_async16(bq_u32 dst, const void *src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
// ... and 4-byte ones through L1 (cp.async.ca: the sizes below 16), a scale each
static __device__ __forceinline__ void bq_cp_async4(bq_u32 dst, const void *src, int bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void bq_cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> static __device__ __forceinline__ void bq_cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
static __device__ __forceinline__ bq_u32 bq_smem_addr(const void *p) { return (bq_u32)__cvta_generic_to_shared(p); }
#endif

// ---- programmatic dependent launch (sm_90 and up) ------------------------------------
// QuantizedLinear's weight streaming is launched with programmatic stream serialization
// right after its activations' quantization: bq_launch_dependents (in that kernel) lets it
// start at once and stream weights, and bq_wait_prior_grid (in the GEMV, before its first
// read of anything the quantization writes) waits until that grid has finished and its
// writes are visible. Both are no-ops in a grid launched the ordinary way, below sm_90,
// and in the CPU emulator.
static __device__ __forceinline__ void bq_launch_dependents() {
#if !defined(BQ_EMULATED) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
static __device__ __forceinline__ void bq_wait_prior_grid() {
#if !defined(BQ_EMULATED) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// ---- dynamic scales: the dynamic and fused families (their preludes define BQ_ASYM) ----
#ifdef BQ_ASYM
#define BQ_VEC ((int)(16 / sizeof(bq_t))) // elements per access
typedef bq_chunk<bq_t, BQ_VEC> bq_xchunk;
typedef bq_chunk<bq_i, BQ_VEC> bq_qchunk;

// The reduction: symmetric keeps a = max |x|; asymmetric keeps a = min(0, min x) and
// b = max(0, max x). fmin/fmax drop NaN operands, so NaN elements are ignored.
struct bq_red {
  bq_c a, b;
};
static __device__ __forceinline__ bq_red bq_red_init() {
  bq_red r;
  r.a = 0;
  r.b = 0;
  return r;
}
static __device__ __forceinline__ void bq_red_add(bq_red &r, bq_c x) {
#if BQ_ASYM
  r.a = bq_min(r.a, x);
  r.b = bq_max(r.b, x);
#else
  r.a = bq_max(r.a, bq_abs(x));
#endif
}
static __device__ __forceinline__ bq_red bq_red_merge(bq_red u, bq_red v) {
#if BQ_ASYM
  u.a = bq_min(u.a, v.a);
  u.b = bq_max(u.b, v.b);
#else
  u.a = bq_max(u.a, v.a);
#endif
  return u;
}
// lane l's reduction (XOR: lane ^ l's); every lane of the warp takes part
template <bool XOR = true>
static __device__ __forceinline__ bq_red bq_red_shfl(bq_red r, int l) {
  bq_red o;
  o.a = XOR ? __shfl_xor_sync(0xffffffffu, r.a, l) : __shfl_sync(0xffffffffu, r.a, l);
#if BQ_ASYM
  o.b = XOR ? __shfl_xor_sync(0xffffffffu, r.b, l) : __shfl_sync(0xffffffffu, r.b, l);
#else
  o.b = 0; // unused
#endif
  return o;
}
// reduce over aligned groups of `width` lanes (a power of two <= 32, uniform across the
// warp): the butterfly's merges at offsets width / 2, ..., 1, in that order, unrolled under
// uniform guards rather than looped; N reductions at once, each offset's shuffles in flight
// together
template <int N>
static __device__ __forceinline__ void bq_red_lanes_n(bq_red (&r)[N], int width) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    if (off < width) {
#pragma unroll
      for (int i = 0; i < N; i++) r[i] = bq_red_merge(r[i], bq_red_shfl(r[i], off));
    }
}
static __device__ __forceinline__ bq_red bq_red_lanes(bq_red r, int width) {
  bq_red a[1] = {r};
  bq_red_lanes_n<1>(a, width);
  return a[0];
}

// The scale (as stored) and zero point from a reduction: docs/numerics.md, "Dynamic quantization".
struct bq_qp {
  bq_s stored;
  bq_scale s;
  int zp;
  bq_zp z;
  bool bounded; // the scale is normal (m == 1, finite, nonzero): bq_quantize_bounded applies
#if BQ_FP8
  bool lean; // bounded and the scale at least 2^-80: bq_f8_lean_quotient applies
#endif
};
#ifndef BQ_POW2
#define BQ_POW2 0
#endif
#if BQ_FP8
#define BQ_SYM_MAX BQ_F8_MAX
#else
#define BQ_SYM_MAX BQ_QMAX
#endif
// The smallest power of two >= s (s >= 0, or inf, which stays): s itself, or s with its
// mantissa cleared and its exponent raised (past the largest finite: inf). Subnormals are
// taken up into the normal range first and down after, both exact; 0 gives the smallest
// positive power of two.
static __device__ __forceinline__ bq_c bq_pow2_up(bq_c s) {
#if BQ_FT == BQ_TYPE_F64
  const bool sub = s < 0x1p-1022;
  const double t = sub ? __dmul_rn(s, 0x1p200) : s;
  long long u = __double_as_longlong(t);
  if ((u & 0xfffffffffffffLL) && t <= 0x1.fffffffffffffp1023) u = (u & ~0xfffffffffffffLL) + (1LL << 52);
  const double p = __longlong_as_double(u);
  return s == 0.0 ? 0x1p-1074 : (sub ? __dmul_rn(p, 0x1p-200) : p);
#else
  const bool sub = s < 0x1p-126f;
  const float t = sub ? __fmul_rn(s, 0x1p64f) : s;
  bq_u32 u = __float_as_uint(t);
  if ((u & 0x7fffffu) && t <= 0x1.fffffep127f) u = (u & ~0x7fffffu) + (1u << 23);
  const float p = __uint_as_float(u);
  return s == 0.0f ? 0x1p-149f : (sub ? __fmul_rn(p, 0x1p-64f) : p);
#endif
}
// bound: args.amax_bound in C (0: none), symmetric plans only
static __device__ __forceinline__ bq_qp bq_params_of(bq_red r, bq_c bound = 0) {
  bq_qp q;
#if !BQ_ASYM
  const bool capped = bound > (bq_c)0 && !(r.a <= bound); // (an inf amax is capped too)
  if (capped) r.a = bound;
#else
  const bool capped = false;
#endif
#if BQ_ASYM
  bq_c s = r.a == r.b ? (bq_c)1 : bq_div(bq_sub(r.b, r.a), (bq_c)(BQ_QMAX - BQ_QMIN));
  if (BQ_POW2) s = bq_pow2_up(s);
  q.stored = bq_scale_from_c(s);
  const bq_c sc = bq_scale_to_c(q.stored);
  bq_i64 z = (bq_i64)BQ_QMIN - bq_round(bq_div(r.a, sc));
  q.zp = (int)(z < BQ_QMIN ? BQ_QMIN : (z > BQ_QMAX ? BQ_QMAX : z));
#else // symmetric: amax over the type's largest value (FP8's largest finite, or qmax)
  bq_c s = r.a == (bq_c)0 ? (bq_c)1 : bq_div(r.a, (bq_c)BQ_SYM_MAX);
  if (BQ_POW2) s = bq_pow2_up(s);
  q.stored = bq_scale_from_c(s);
  const bq_c sc = bq_scale_to_c(q.stored);
  q.zp = 0;
#endif
  q.s = bq_scale_of(sc);
  q.z = bq_zp_of(q.zp);
  // Every finite element x of the segment has |x| <= max(|a|, |b|), so |x / s| stays within
  // a few units of the q-range's width (the stored scale is s rounded once, or up to a power
  // of two); an infinite element makes the scale infinite or NaN, which fails corr. A
  // segment whose amax the bound cut has elements beyond it: the general forms.
  q.bounded = q.s.m == (bq_c)1 && q.s.corr && !capped;
#if BQ_ST == BQ_TYPE_UE8M0
  q.bounded = q.bounded && !(q.s.s < s); // a power of two past 2^127, stored as 2^127
#endif
#if BQ_FP8
  q.lean = q.bounded && BQ_FT != BQ_TYPE_F64 && sc >= (bq_c)0x1p-80;
#endif
  return q;
}

#if BQ_FP8 && BQ_FT != BQ_TYPE_F64
// x / s for the FP8 rounding, in a segment whose scale is lean: normal, at least 2^-80, and
// over elements |x| <= amax (not capped). Every quotient then stays near the FP8 range, so
// Markstein's correction needs neither bq_f8_quotient_f32's guard nor its rescaling of
// tiny x: |x| < 2^-96 gives |x / s| < 2^-16, below E4M3's codes and at most E5M2's
// smallest subnormal, where the residual (no bit of it below 2^-149) and so the correction
// stay exact. The residual is taken negated, t = q0 s - x, and subtracted: for s > 0 the
// result is the quotient of |x| with x's sign, -0 included (q0 + (x - q0 s) would turn -0
// into +0; an exactly zero t is absorbed by q0), with no instruction to put the sign back.
// A power-of-two scale divides exactly: x times its reciprocal.
static __device__ __forceinline__ float bq_f8_lean_quotient(float x, const bq_scale &s) {
#if BQ_POW2
  return __fmul_rn(x, s.rcp);
#else
  const float q0 = __fmul_rn(x, s.rcp);
  return __fmaf_rn(-__fmaf_rn(q0, s.ss, -x), s.rcp, q0);
#endif
}
#endif

// (bq_params_of clamps the zero point into the q-range, so bq_quantize_int is exact here)
// A chunk's values, already in C (c: T values widened)
static __device__ __forceinline__ void bq_quantize_vals(const bq_c (&c)[BQ_VEC], bq_qchunk &o, const bq_qp &q) {
  if (q.bounded) { // uniform across the segment
#if BQ_FP8 || BQ_FT == BQ_TYPE_F64
#pragma unroll
    for (int j = 0; j < BQ_VEC; j++) o.e[j] = (bq_i)bq_quantize_bounded(c[j], q.s, q.z);
#elif !BQ_ASYM && !defined(BQ_EMULATED) && BQ_IT == BQ_TYPE_S8 && BQ_QMIN == BQ_I_MIN && BQ_QMAX == BQ_I_MAX
    // s8's whole range: rne to int32 (saturating, NaN -> 0), then four a word saturated to
    // s8 by bq_pack4, bq_quantize_sym's codes with a byte permute fewer per four elements
    int t[BQ_VEC];
#pragma unroll
    for (int j = 0; j < BQ_VEC; j++) t[j] = __float2int_rn(bq_quotient_plain<false>(c[j], q.s));
#pragma unroll
    for (int j = 0; j < BQ_VEC; j += 4) *(bq_u32 *)&o.e[j] = bq_pack4(t[j], t[j + 1], t[j + 2], t[j + 3]);
#elif !BQ_ASYM
#pragma unroll
    for (int j = 0; j < BQ_VEC; j++) o.e[j] = (bq_i)bq_quantize_sym(c[j], q.s);
#else
    bq_quantize_near<false>(c, q.s, q.zp, o.e); // the zero point lies in the q-range
#endif
  } else {
#pragma unroll
    for (int j = 0; j < BQ_VEC; j++) o.e[j] = (bq_i)bq_quantize_int(c[j], q.s, q.z);
  }
}
// The same from the chunk's T values (the dynamic kernels' form: its machine code differs
// from widening first and calling bq_quantize_vals)
static __device__ __forceinline__ void bq_quantize_chunk(const bq_xchunk &a, bq_qchunk &o, bq_qp q) {
  if (q.bounded) {
#if BQ_FP8 || BQ_FT == BQ_TYPE_F64
#pragma unroll
    for (int j = 0; j < BQ_VEC; j++) o.e[j] = (bq_i)bq_quantize_bounded(bq_to_c(a.e[j]), q.s, q.z);
#elif !BQ_ASYM
#pragma unroll
    for (int j = 0; j < BQ_VEC; j++) o.e[j] = (bq_i)bq_quantize_sym(bq_to_c(a.e[j]), q.s);
#else
    bq_quantize_near<false>(a.e, q.s, q.zp, o.e);
#endif
  } else {
#pragma unroll
    for (int j = 0; j < BQ_VEC; j++) o.e[j] = (bq_i)bq_quantize_int(bq_to_c(a.e[j]), q.s, q.z);
  }
}
// FP8 segments with a lean scale (bq_is_lean, uniform across a segment) take
// bq_quantize_chunk_as<true>: the lean quotient, two codes a conversion. Callers pick the
// form once for a whole batch of chunks, so that the chunks' arithmetic interleaves.
#define BQ_LEAN (BQ_FP8 && BQ_FT != BQ_TYPE_F64)
static __device__ __forceinline__ bool bq_is_lean(const bq_qp &q) {
#if BQ_LEAN
  return q.lean;
#else
  (void)q;
  return false;
#endif
}
template <bool LEAN>
static __device__ __forceinline__ void bq_quantize_chunk_as(const bq_xchunk &a, bq_qchunk &o, const bq_qp &q) {
#if BQ_LEAN
  if (LEAN) {
#pragma unroll
    for (int j = 0; j < BQ_VEC; j += 4) { // four codes a word (BQ_VEC: 4 or 8)
      const bq_u32 lo = bq_f8x2_of_f32(bq_f8_lean_quotient(bq_to_c(a.e[j]), q.s),
                                       bq_f8_lean_quotient(bq_to_c(a.e[j + 1]), q.s));
      const bq_u32 hi = bq_f8x2_of_f32(bq_f8_lean_quotient(bq_to_c(a.e[j + 2]), q.s),
                                       bq_f8_lean_quotient(bq_to_c(a.e[j + 3]), q.s));
      *(bq_u32 *)&o.e[j] = (lo & 0xFFFFu) | hi << 16;
    }
    return;
  }
#endif
  bq_quantize_chunk(a, o, q);
}
// the form picked for this chunk alone (uniform across the segment all the same)
static __device__ __forceinline__ void bq_quantize_chunk_any(const bq_xchunk &a, bq_qchunk &o, const bq_qp &q) {
  if (bq_is_lean(q)) bq_quantize_chunk_as<true>(a, o, q);
  else bq_quantize_chunk_as<false>(a, o, q);
}
static __device__ __forceinline__ void bq_reduce_chunk(const bq_xchunk &a, bq_red &r) {
#pragma unroll
  for (int j = 0; j < BQ_VEC; j++) bq_red_add(r, bq_to_c(a.e[j]));
}
// Symmetric 16-bit data may keep max |x| on the packed pairs of their words (BQ_HMAX2:
// bq_hmax2_chunk, then bq_hmax2_fold), one max.xorsign.abs a pair (max(|u|, |v|),
// its sign the operands' XOR, cleared once at the end; NaN operands dropped, as bq_max
// drops them), and widen only the two halves of the result: exact, as the halves' maximum
// is one of the elements. (Row-major UE8M0 scales keep the element form, which ran faster
// there on the H200.)
#define BQ_HMAX2 (!BQ_ASYM && (BQ_FT == BQ_TYPE_F16 || BQ_FT == BQ_TYPE_BF16) && \
                  !(BQ_ST == BQ_TYPE_UE8M0 && BQ_SL == BQ_SL_ROWS))
#if BQ_HMAX2 && !defined(BQ_EMULATED)
static __device__ __forceinline__ bq_u32 bq_hmax2_xabs(bq_u32 u, bq_u32 v) {
  bq_u32 d;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 860
#if BQ_FT == BQ_TYPE_BF16
  asm("max.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(u), "r"(v));
#else
  asm("max.xorsign.abs.f16x2 %0, %1, %2;" : "=r"(d) : "r"(u), "r"(v));
#endif
#else // sm_80: the magnitudes' maximum (its sign clear: the XOR's is cleared anyway)
  u &= 0x7FFF7FFFu;
  v &= 0x7FFF7FFFu;
#if BQ_FT == BQ_TYPE_BF16
  asm("max.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(u), "r"(v));
#else
  asm("max.f16x2 %0, %1, %2;" : "=r"(d) : "r"(u), "r"(v));
#endif
#endif
  return d;
}
#endif
#if BQ_HMAX2
// the pairs' accumulator m (from 0: +0 pairs are never NaN, so every NaN operand meets a
// number) after chunk a; then folded into r
static __device__ __forceinline__ bq_u32 bq_hmax2_chunk(bq_u32 m, const bq_xchunk &a) {
  const bq_u32 *w = (const bq_u32 *)a.e;
#pragma unroll
  for (int j = 0; j < BQ_VEC / 2; j++) m = bq_hmax2_xabs(m, w[j]);
  return m;
}
static __device__ __forceinline__ void bq_hmax2_fold(bq_red &r, bq_u32 m) {
  m &= 0x7FFF7FFFu;
  r.a = bq_max(r.a, bq_max(bq_to_c((bq_t)(m & 0xFFFFu)), bq_to_c((bq_t)(m >> 16))));
}
#endif
// Reduces the chunks a[i], i < n, into r where ok: on packed pairs where BQ_HMAX2 allows.
template <int N>
static __device__ __forceinline__ void bq_reduce_chunks(const bq_xchunk (&a)[N], bool ok, int n, bq_red &r) {
#if BQ_HMAX2
  bq_u32 m = 0;
#pragma unroll
  for (int i = 0; i < N; i++)
    if (ok && i < n) m = bq_hmax2_chunk(m, a[i]);
  bq_hmax2_fold(r, m);
#else
#pragma unroll
  for (int i = 0; i < N; i++)
    if (ok && i < n) bq_reduce_chunk(a[i], r);
#endif
}

// Team-wide reduction; every lane gets the result. red_smem holds one slot per warp of
// a block-wide team. REDUX (symmetric, f32 compute): the warp's step is one redux.sync on
// the bits of max |x|, which are >= +0 and never NaN and so order as the values do.
template <bool REDUX = false>
static __device__ __forceinline__ bq_red bq_red_team(bq_red r, int tpr, bq_red *red_smem) {
#if !defined(BQ_EMULATED) && !BQ_ASYM && BQ_FT != BQ_TYPE_F64
  if (REDUX) {
    bq_u32 m;
    asm("redux.sync.max.u32 %0, %1, 0xffffffff;" : "=r"(m) : "r"(__float_as_uint(r.a)));
    r.a = __uint_as_float(m);
  } else
#endif
    r = bq_red_lanes(r, 32);
  if (tpr > 32) {
    const int warp = threadIdx.x >> 5, nw = tpr >> 5;
    if ((threadIdx.x & 31) == 0) red_smem[warp] = r;
    bq_team_sync(tpr);
    r = red_smem[0];
    for (int i = 1; i < nw; i++) r = bq_red_merge(r, red_smem[i]);
    bq_team_sync(tpr); // the slots are reused by the team's next row
  }
  return r;
}
#endif

// ---- Philox4x32-10: the counter-based generator of the rotation's random signs and of -------
// stochastic rounding's draws (Random123's; tests/reference_rotate.h checks its known answers)
static __device__ __forceinline__ void bq_philox4x32_10(bq_u32 (&c)[4], bq_u32 k0, bq_u32 k1) {
#pragma unroll
  for (int i = 0; i < 10; i++) {
    if (i) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    const bq_u64 p0 = (bq_u64)0xD2511F53u * c[0], p1 = (bq_u64)0xCD9E8D57u * c[2];
    const bq_u32 lo0 = (bq_u32)p0, hi0 = (bq_u32)(p0 >> 32), lo1 = (bq_u32)p1, hi1 = (bq_u32)(p1 >> 32);
    const bq_u32 n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
    c[0] = n0, c[1] = lo1, c[2] = n2, c[3] = lo0;
  }
}

// ---- the Walsh-Hadamard rotation's steps (docs/numerics.md, "Rotation"): rotate.cu's kernels,
// and the microscaling kernels' fused rotation ----------------------------------------------
#if BQ_FT == BQ_TYPE_F64
#define BQ_RSQRT2 0x1.6a09e667f3bcdp-1
#else
#define BQ_RSQRT2 0x1.6a09e6p-1f
#endif
// C(1 / sqrt(2^k)): a power of two, times C(1 / sqrt(2)) for odd k (exact either way)
static __device__ __forceinline__ bq_c bq_rot_c(int k) {
#if BQ_FT == BQ_TYPE_F64
  const bq_c p = __longlong_as_double((bq_i64)(1023 - (k >> 1)) << 52);
#else
  const bq_c p = __uint_as_float((bq_u32)(127 - (k >> 1)) << 23);
#endif
  return k & 1 ? bq_mul(p, (bq_c)BQ_RSQRT2) : p;
}
// The signs of elements a .. a + E - 1 of a row (E divides a and 128), at j = (a + k) % n in
// their block: bit k set where element a + k is negated, bit j % 32 of word (j / 32) % 4 of
// Philox4x32-10 at (j / 128, 0, 0, 0)
template <int E> static __device__ __forceinline__ bq_u32 bq_rot_signs(int a, int n, bq_u32 k0, bq_u32 k1) {
  const int j0 = a % n;
  bq_u32 w[4] = {(bq_u32)(j0 >> 7), 0u, 0u, 0u}, neg = 0;
  bq_philox4x32_10(w, k0, k1);
#pragma unroll
  for (int k = 0; k < E; k++) {
    const int j = (a + k) % n, i = (j >> 5) & 3; // (selects, not w[i]: a local-memory array)
    const bq_u32 wi = i == 0 ? w[0] : i == 1 ? w[1] : i == 2 ? w[2] : w[3];
    neg |= ((wi >> (j & 31)) & 1u) << k;
  }
  return neg;
}
// A lane's E consecutive elements c of blocks of n = 2^log2n that n / E consecutive lanes hold
// (or one lane, n <= E): forward c = H (s c) cn, backward c = s ((H c) cn), neg the lane's
// signs, cn = bq_rot_c(log2n). The butterfly's stages with h < E run in the lane's registers,
// the others between lanes lane ^ h / E (mask: the lanes taking part); each stage computes
// every pair of the contract's stage, so the bits do not depend on E or on which lane holds what.
template <int E>
static __device__ __forceinline__ void bq_rot_apply(bq_c (&c)[E], int lane, int log2n, bq_u32 neg, bq_c cn,
                                                    bool backward, bq_u32 mask) {
  const int n = 1 << log2n;
  if (!backward) {
#pragma unroll
    for (int k = 0; k < E; k++) c[k] = (neg >> k) & 1u ? -c[k] : c[k];
  }
#pragma unroll
  for (int h = 1; h < E; h <<= 1) {
    if (h >= n) break;
#pragma unroll
    for (int k = 0; k < E; k++)
      if (!(k & h)) {
        const bq_c a = c[k], b = c[k + h];
        c[k] = bq_add(a, b);
        c[k + h] = bq_sub(a, b);
      }
  }
  for (int lh = 1; lh * E < n; lh <<= 1) {
    // this lane holds the pairs' second elements where up: o - c there, c + o elsewhere, each
    // one fma by +-1 (exact product, one rounding: the same bits, zeros' signs included)
    const bq_c sg = lane & lh ? (bq_c)-1 : (bq_c)1;
#pragma unroll
    for (int k = 0; k < E; k++) {
      const bq_c o = __shfl_xor_sync(mask, c[k], lh);
      c[k] = bq_fma(c[k], sg, o);
    }
  }
#pragma unroll
  for (int k = 0; k < E; k++) {
    c[k] = bq_mul(c[k], cn);
    if (backward) c[k] = (neg >> k) & 1u ? -c[k] : c[k];
  }
}

// Stochastic rounding's draws (BQ_SR 1; docs/numerics.md, "Stochastic rounding"): element i
// (its row-major index plus args.offset) takes 16 bits, bits 16 (i % 2) of word (i / 2) % 4
// of Philox4x32-10 at counter (i / 8, 1) (i / 8's low and high words, 1, 0), keyed by the
// seed. bq_sr_draws fills u with those of N consecutive elements from i0: one generator call
// per 8 of them where i0 starts a set of 8 (the usual case), else a call per set touched.
#ifndef BQ_SR
#define BQ_SR 0
#endif
#ifndef BQ_MX_ROT
#define BQ_MX_ROT 0 // microscaling: the fused rotation (bq_mx_lanes)
#endif
static __device__ __forceinline__ void bq_sr_block(bq_u64 b, bq_u32 k0, bq_u32 k1, bq_u32 (&c)[4]) {
  c[0] = (bq_u32)b, c[1] = (bq_u32)(b >> 32), c[2] = 1u, c[3] = 0u;
  bq_philox4x32_10(c, k0, k1);
}
// element i's 16 bits from its set's words (i % 8 any)
static __device__ __forceinline__ bq_u32 bq_sr_pick(const bq_u32 (&c)[4], bq_u64 i) {
  const int w = (int)(i >> 1) & 3;
  const bq_u32 v = w == 0 ? c[0] : w == 1 ? c[1] : w == 2 ? c[2] : c[3];
  return (v >> ((int)(i & 1) * 16)) & 0xffffu;
}
template <int N> static __device__ __forceinline__ void bq_sr_draws(bq_u64 i0, bq_u32 k0, bq_u32 k1, bq_u32 (&u)[N]) {
  bq_u32 c[4];
  if (N % 8 == 0 && (i0 & 7) == 0) {
#pragma unroll
    for (int b = 0; b < N / 8; b++) {
      bq_sr_block((i0 + 8ull * (bq_u64)b) >> 3, k0, k1, c);
#pragma unroll
      for (int k = 0; k < 8; k++) u[8 * b + k < N ? 8 * b + k : 0] = (c[k >> 1] >> ((k & 1) * 16)) & 0xffffu;
    }
    return;
  }
  // the j-th set touched, which element k is in (indices wrap modulo 2^64, as the host's do)
  const int s = (int)(i0 & 7);
#pragma unroll 1
  for (int j = 0; j <= (s + N - 1) >> 3; j++) {
    bq_sr_block(((i0 & ~7ull) + 8ull * (bq_u64)j) >> 3, k0, k1, c);
#pragma unroll
    for (int k = 0; k < N; k++)
      if ((s + k) >> 3 == j) u[k] = bq_sr_pick(c, i0 + k);
  }
}

#if BQ_SR
// A draw's threshold (u + 1/2) 2^-16 = (2u + 1) 2^-17, exact: 1 + it from the bits (2u + 1 has
// 17 bits, placed below 1's exponent), less 1 (Sterbenz: exact). No integer-to-float
// conversion, which issues at a quarter of the FP32 rate.
static __device__ __forceinline__ float bq_sr_threshold_f32(bq_u32 u) {
  return __fsub_rn(__uint_as_float(0x3f800000u | ((2u * u + 1u) << 6)), 1.0f);
}
static __device__ __forceinline__ double bq_sr_threshold_f64(bq_u32 u) {
  return __dsub_rn(__longlong_as_double(0x3ff0000000000000ll | ((bq_i64)(2u * u + 1u) << 35)), 1.0);
}
// The stochastic rounding of v (|v| < top, finite) onto a float grid of MBITS mantissa bits and
// smallest normal exponent EMIN (docs/numerics.md, "Stochastic rounding"): |v| = (n + f) q, q
// the grid's step at |v|, n an integer, 0 <= f < 1; (n + 1) q (at most top) when
// (u + 1/2) 2^-16 < f, else n q, v's sign kept. Each step is exact, so C = f32 and f64 give
// the reference's doubles' result; the value is on the grid, so rounding it to nearest into
// the type is exact.
template <int EMIN, int MBITS> static __device__ __forceinline__ bq_c bq_sr_grid(bq_c v, bq_u32 u, bq_c top) {
  const bq_c a = bq_abs(v);
#if BQ_FT == BQ_TYPE_F64
  const bq_i64 e = max((int)(__double_as_longlong(a) >> 52) - 1023, EMIN) - MBITS;
  const double q = __longlong_as_double((1023 + e) << 52), qi = __longlong_as_double((1023 - e) << 52);
  const double t = __dmul_rn(a, qi), n = floor(t), f = __dsub_rn(t, n);
  const double r = bq_sr_threshold_f64(u);
  const double m = fmin(__dmul_rn(__dadd_rn(n, r < f ? 1.0 : 0.0), q), top);
  return __longlong_as_double(__double_as_longlong(m) | (__double_as_longlong(v) & (1ll << 63)));
#else
  const int e = max((int)(__float_as_uint(a) >> 23) - 127, EMIN) - MBITS;
  const float q = __uint_as_float((bq_u32)(127 + e) << 23), qi = __uint_as_float((bq_u32)(127 - e) << 23);
  const float t = __fmul_rn(a, qi), n = floorf(t), f = __fsub_rn(t, n);
  const float r = bq_sr_threshold_f32(u);
  const float m = fminf(__fmul_rn(__fadd_rn(n, r < f ? 1.0f : 0.0f), q), top);
  return __uint_as_float(__float_as_uint(m) | (__float_as_uint(v) & 0x80000000u));
#endif
}
// The same onto the integers (step 1): n + 1 when (u + 1/2) 2^-16 < f, v's sign kept (-0
// stays -0); infinities stay, NaN gives 0 (as rne's does)
static __device__ __forceinline__ bq_c bq_sr_rint(bq_c v, bq_u32 u) {
#if BQ_FT == BQ_TYPE_F64
  const double a = fabs(v), n = floor(a), f = __dsub_rn(a, n), r = bq_sr_threshold_f64(u);
  const double m = __dadd_rn(n, r < f ? 1.0 : 0.0);
  return v == v ? copysign(m, v) : 0.0;
#else
  const float a = fabsf(v), n = floorf(a), f = __fsub_rn(a, n), r = bq_sr_threshold_f32(u);
  const float m = __fadd_rn(n, r < f ? 1.0f : 0.0f);
  return v == v ? copysignf(m, v) : 0.0f;
#endif
}
#ifndef BQ_MX_RULE
// Quantize and fake quantize with stochastic rounding in place of rne (the affine family):
// the quotient is C(x) / C(s) correctly rounded (bq_f8_quotient; below 2^-17 it cannot go up,
// so its last bits there do not matter), then the zero point and the saturation as
// bq_quantize's and bq_fake_quantize's, or FP8's grid and saturation
#if BQ_FP8
static __device__ __forceinline__ int bq_quantize_sr(bq_c x, const bq_scale &s, const bq_zp &, bq_u32 u) {
  const bq_c v = bq_f8_quotient(x, s);
  if (!(bq_abs(v) < (bq_c)BQ_F8_MAX)) return bq_f8_of_c(v); // saturates; NaN's code
  return bq_f8_of_c(bq_sr_grid<1 - BQ_F8_BIAS, BQ_F8_M>(v, u, (bq_c)BQ_F8_MAX));
}
static __device__ __forceinline__ bq_c bq_fake_quantize_sr(bq_c x, const bq_scale &s, const bq_zp &z, bq_u32 u) {
  return bq_dequantize(bq_quantize_sr(x, s, z, u), s.s, z);
}
#else
static __device__ __forceinline__ int bq_quantize_sr(bq_c x, const bq_scale &s, const bq_zp &z, bq_u32 u) {
  const bq_c r = bq_sr_rint(bq_f8_quotient(x, s), u);
  const int inside = z.base + bq_to_int_rz(bq_sub(r, z.lo));
  const int below = r < z.lo ? BQ_QMIN : inside;
  return r > z.hi ? BQ_QMAX : below;
}
static __device__ __forceinline__ bq_c bq_fake_quantize_sr(bq_c x, const bq_scale &s, const bq_zp &z, bq_u32 u) {
  const bq_c r = bq_add(bq_sr_rint(bq_f8_quotient(x, s), u), (bq_c)0); // + 0 turns -0 into the integer 0
  const bq_c below = r < z.lo ? z.a : r;
  return bq_mul(r > z.hi ? z.b : below, s.s);
}
#endif
#endif
#endif

// ---- the microscaling formats (BQ_MX_RULE defined: mx.cu, and fused.cu producing them) ----------
// Prelude defines: BQ_IT BQ_TYPE_E2M1, _E4M3 or _E5M2; BQ_ST BQ_TYPE_UE8M0, or BQ_TYPE_E4M3 (NVFP4);
// BQ_MX_LAYOUT (0 row-major, 1 MN-major, 2 blocked); BQ_MX_RULE (bq_scale_rule's values).
#ifdef BQ_MX_RULE
#define BQ_MX_NV (BQ_ST == BQ_TYPE_E4M3) // NVFP4: E4M3 group scales times the tensor scale
#ifndef BQ_EMULATED
// byte j of the result: byte (sel >> 4j) & 7 of b:a (bit 3 of the nibble 0)
static __device__ __forceinline__ bq_u32 bq_prmt(bq_u32 a, bq_u32 b, bq_u32 sel) {
  bq_u32 d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}
#endif
// NVFP4 under the library's rule from f32 arithmetic: bq_mx_nv_fast where a group's scale allows
#define BQ_MX_NV_FAST (BQ_MX_NV && BQ_MX_RULE == 0 && BQ_FT != BQ_TYPE_F64)
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
// (6 and past it, inf), NaN -> 0x7, -0 -> 0x8. f64: each comparison is a midpoint between
// two magnitudes, strict where the tie goes to the lower (even) code and not where it goes
// up. f32, from the bits (the same code for every f32 pattern): below 1, rint(2|v|) in the
// low bits of 2|v| + 2^23; from 1 on, the mantissa rounded to one bit (RNE: add just under
// half its last place plus the kept bit), read with the exponent from 1.0's code, 2.
#if BQ_FT == BQ_TYPE_F64
static __device__ __forceinline__ int bq_mx_elem_of(bq_c v) {
  const bq_c a = bq_abs(v);
  if (!(a == a)) return 7;
  const int c = (a > (bq_c)0.25) + (a >= (bq_c)0.75) + (a > (bq_c)1.25) + (a >= (bq_c)1.75) + (a > (bq_c)2.5) +
                (a >= (bq_c)3.5) + (a > (bq_c)5.0);
  return c | (__double_as_longlong(v) < 0 ? 8 : 0);
}
#else
static __device__ __forceinline__ int bq_mx_elem_of(bq_c v) {
  const bq_u32 u = __float_as_uint(v), a = u & 0x7fffffffu;
  const bq_u32 lo = __float_as_uint(__fmaf_rn(__uint_as_float(a), 2.0f, 0x1p23f)) & 3u;
  const bq_u32 hi = min((a + 0x1fffffu + ((a >> 22) & 1u)) >> 22, 259u) - 252u; // (inf, NaN: 7)
  const bq_u32 c = a < 0x3f800000u ? lo : hi;
  return (int)(c | (a <= 0x7f800000u ? (u >> 28) & 8u : 0u));
}
// |v|'s magnitude code alone, 0 to 7, as bq_mx_elem_of takes it (NVFP4's fast quotient):
// the clamp at 6's bits first, which also saturates inf and NaN
static __device__ __forceinline__ bq_u32 bq_e2m1_mag(float v) {
  const bq_u32 u = min(__float_as_uint(v) & 0x7fffffffu, 0x40c00000u);
  const bq_u32 lo = __float_as_uint(__fmaf_rn(__uint_as_float(u), 2.0f, 0x1p23f)) & 3u;
  const bq_u32 hi = (u - 0x3f000000u + 0x1fffffu + ((u >> 22) & 1u)) >> 22; // (252 taken off before the shift)
  return u < 0x3f800000u ? lo : hi;
}
#endif
// E2M1 code -> C, exact, from the f32's bits: magnitude m from 2 on is (2 + m % 2) 2^(m / 2 - 2),
// whose exponent and mantissa bit read (m + 252) << 22; 1 is 0.5, 0 is 0; then the sign bit
static __device__ __forceinline__ bq_c bq_mx_elem_to_c(int c) {
  const bq_u32 m = (bq_u32)c & 7u;
  return (bq_c)__uint_as_float((m < 2u ? m * 0x3f000000u : (m + 252u) << 22) | (((bq_u32)c & 8u) << 28));
}
#else
static __device__ __forceinline__ int bq_mx_elem_of(bq_c v) { return bq_f8_of_c(v); }
static __device__ __forceinline__ bq_c bq_mx_elem_to_c(int c) { return bq_f8_to_c(c); }
#endif

#if BQ_SR
// Stochastic rounding (docs/numerics.md, "Stochastic rounding"): |v| = (n + f) q, q the
// element grid's step at |v| (2^(max(e, emin) - mantissa bits), e |v|'s exponent, emin the
// smallest normal's), n an integer, 0 <= f < 1; the code of (n + 1) q (at most max) when
// (u + 1/2) 2^-16 < f, else of n q, v's sign kept. Each step is exact, so C = f32 and f64
// give the reference's doubles' result. |v| at or past max, inf and NaN: as round to nearest.
#if BQ_IT == BQ_TYPE_E2M1
#define BQ_MX_EMIN 0
#elif BQ_IT == BQ_TYPE_E4M3
#define BQ_MX_EMIN (-6)
#else
#define BQ_MX_EMIN (-14)
#endif
static __device__ __forceinline__ int bq_mx_elem_sr(bq_c v, bq_u32 u) {
  if (!(bq_abs(v) < (bq_c)BQ_MX_MAX)) return bq_mx_elem_of(v);
  return bq_mx_elem_of(bq_sr_grid<BQ_MX_EMIN, BQ_MX_MBITS>(v, u, (bq_c)BQ_MX_MAX));
}
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
// f32 -> E4M3 code, round to nearest even, saturating to 448 (NaN: 0x7F): the instruction
// where BQ_F8_HW's conditions hold (an NVFP4 group's scale costs one), else from the bits
static __device__ __forceinline__ int bq_e4m3_of(float v) {
#if !defined(BQ_EMULATED) && !defined(BQ_FP8_SOFT) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  bq_u16 h;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(h) : "f"(0.0f), "f"(v));
  return h & 0xFF; // (the second operand lands in the low byte)
#else
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
#endif
}

// A group's scale as the elements use it: sc = C(scale) (UE8M0's power of two, or NVFP4's
// g times the E4M3 scale, one f32 product), and for UE8M0 its reciprocal, exact (the
// reciprocal of 2^k for k in [-127, 127] is a power of two of f32 too): x * rcp is then
// x / sc rounded once, the same bits as the division.
// NVFP4 under a peer's rule quantizes by the peer's multiplier instead (rcp): torchao's
// (1 / g) / s8, Transformer Engine's min(1 / (s8 g), FLT_MAX), f32 steps as they take them.
struct bq_mx_scale {
  bq_c sc, rcp;
#if BQ_MX_NV && BQ_MX_RULE == 0
  bq_scale q; // sc as bq_f8_quotient takes it: the library's rule divides, by reciprocal and correction
  bool fast;  // sc positive and q.plain: bq_mx_nv_fast applies (f32 arithmetic)
#endif
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
  s.q = bq_scale_of(s.sc);
  s.fast = BQ_MX_NV_FAST && s.q.plain && s.sc > (bq_c)0;
#endif
#else
  (void)g;
  s.sc = (bq_c)bq_ue8m0_f32(code);
  s.rcp = (bq_c)bq_ue8m0_f32(code == 255 ? 255 : 254 - code);
#endif
  return s;
}
#if BQ_MX_NV_FAST
// NVFP4's quotient where s.fast: Markstein's correction of |x| rcp with no rescaling and no
// guard, then x's sign. |x| under 2^-96 gives a quotient under 2^-6 however it rounds (code
// 0); past 2^90 (or an infinite |x|) q0 saturates and the correction's NaN too, through
// bq_e2m1_mag; in between this is bq_f8_quotient's RN(|x| / s) (its zero residual keeps
// q0: the same with |x|). The sign is x's unless the quotient is NaN (x NaN: q0 NaN).
static __device__ __forceinline__ int bq_mx_nv_fast(float x, const bq_mx_scale &s) {
  const float a = fabsf(x), q0 = __fmul_rn(a, s.q.rcp);
  const float q1 = __fmaf_rn(__fmaf_rn(-q0, s.q.s, a), s.q.rcp, q0);
  return (int)(bq_e2m1_mag(q1) | (q0 == q0 ? (__float_as_uint(x) >> 28) & 8u : 0u));
}
#endif
static __device__ __forceinline__ int bq_mx_quantize(bq_c x, const bq_mx_scale &s) {
#if BQ_MX_NV && BQ_MX_RULE == 0
#if BQ_MX_NV_FAST
  if (s.fast) return bq_mx_nv_fast(x, s);
#endif
  return bq_mx_elem_of(bq_f8_quotient(x, s.q)); // (the IEEE quotient wherever E2M1 can tell)
#else
  return bq_mx_elem_of(bq_mul(x, s.rcp));
#endif
}
#if BQ_MX_NV_FAST
// N elements' codes, the quotient's form chosen once for them (a branch an element would
// cost as much as the arithmetic it saves)
template <int N>
static __device__ __forceinline__ void bq_mx_quantize_n(const bq_c (&c)[N], const bq_mx_scale &s, int (&q)[N]) {
  if (s.fast) {
#pragma unroll
    for (int j = 0; j < N; j++) q[j] = bq_mx_nv_fast(c[j], s);
    return;
  }
#pragma unroll
  for (int j = 0; j < N; j++) q[j] = bq_mx_elem_of(bq_f8_quotient(c[j], s.q));
}
#endif
#if BQ_SR
// the same quotient, rounded stochastically by the draw u (the IEEE quotient throughout: the
// draw can tell any two quotients apart)
static __device__ __forceinline__ int bq_mx_quantize_sr(bq_c x, const bq_mx_scale &s, bq_u32 u) {
#if BQ_MX_NV && BQ_MX_RULE == 0
  return bq_mx_elem_sr(bq_div(x, s.sc), u);
#else
  return bq_mx_elem_sr(bq_mul(x, s.rcp), u);
#endif
}
#endif

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


// MXFP4 from bf16 or f16 (rounding to nearest): two elements a 32-bit step, in the packed
// half-precision arithmetic and integer steps on the halves, the same codes as
// bq_mx_elem_of(x * rcp) in f32. rcp is a power of two, so x rcp is exact in the half type
// wherever it is at least the type's smallest normal (below, code 0 with x's sign either way)
// and is inf where it overflows the type (at least 6 in f32: code 7 either way); rcp must be
// a normal of the type, or NaN (the caller keeps the f32 form otherwise). Then per half, as
// bq_e2m1_mag and bq_mx_elem_of do in f32: the magnitude clamped at 6 (inf and NaN too); from
// 1 on, the mantissa rounded to one bit (RNE) with the exponent read from its bits, the
// code's 3 bits from (c + BQ_H2_HI + lsb) >> BQ_H2_SH (4 << BQ_H2_SH of it is the code's
// offset from 1.0's bits, mod 8); below 1, rint(2c) as the low bits of 2c + BQ_H2_LOW (a
// power of two whose step is 1) rounded to the type; the sign unless NaN. No carry crosses
// the halves: every sum stays under 2^16.
#define BQ_MX_HALF_PAIRS ((BQ_FT == BQ_TYPE_BF16 || BQ_FT == BQ_TYPE_F16) && BQ_IT == BQ_TYPE_E2M1 && !BQ_MX_NV && !BQ_SR)
// NVFP4 under the library's rule from f16, or from bf16 where the packed bf16 comparison
// exists (sm_90 on): bq_nv_pairs, below
#if BQ_MX_NV_FAST && !BQ_SR && \
    (BQ_FT == BQ_TYPE_F16 || (BQ_FT == BQ_TYPE_BF16 && (defined(BQ_EMULATED) || __CUDA_ARCH__ >= 900)))
#define BQ_MX_NV_PAIRS 1
#else
#define BQ_MX_NV_PAIRS 0
#endif
#if BQ_MX_HALF_PAIRS || BQ_MX_NV_PAIRS
#if BQ_FT == BQ_TYPE_BF16 // 7 mantissa bits: 6.0, 1.0 + 0x4080 = 2^15, the largest finite + 0x7f = 0x7fff
#define BQ_H2_SIX 0x40c040c0u
#define BQ_H2_SH 6
#define BQ_H2_HI 0x011f011fu
#define BQ_H2_LOW 0x43004300u
#define BQ_H2_GE1 0x40804080u
#define BQ_H2_NAN 0x007f007fu
#define BQ_H2_MIN 0x1p-126f
#define BQ_H2_MAX 0x1p127f
#else // f16, 10 mantissa bits
#define BQ_H2_SIX 0x46004600u
#define BQ_H2_SH 9
#define BQ_H2_HI 0x08ff08ffu
#define BQ_H2_LOW 0x64006400u
#define BQ_H2_GE1 0x44004400u
#define BQ_H2_NAN 0x03ff03ffu
#define BQ_H2_MIN 0x1p-14f
#define BQ_H2_MAX 0x1p15f
#endif
#define BQ_H2_ONE (BQ_FT == BQ_TYPE_BF16 ? 0x3f803f80u : 0x3c003c00u)
#ifndef BQ_EMULATED
#if BQ_FT == BQ_TYPE_BF16
#define BQ_H2_TYPE ".bf16x2"
#else
#define BQ_H2_TYPE ".f16x2"
#endif
#define BQ_H2_ASM(op) op BQ_H2_TYPE " %0, %1, %2"
static __device__ __forceinline__ bq_u32 bq_h2_fma(bq_u32 a, bq_u32 b, bq_u32 c) {
  bq_u32 d;
  asm(BQ_H2_ASM("fma.rn") ", %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
static __device__ __forceinline__ bq_u32 bq_h2_min(bq_u32 a, bq_u32 b) {
  bq_u32 d;
  asm(BQ_H2_ASM("min") ";" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
// 1.0 in the halves where a >= b or either is NaN, else 0
static __device__ __forceinline__ bq_u32 bq_h2_geu(bq_u32 a, bq_u32 b) {
  bq_u32 d;
  asm("set.geu" BQ_H2_TYPE BQ_H2_ASM("") ";" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
// f32 to f16 rounded up
static __device__ __forceinline__ bq_u32 bq_f32_to_f16_ru(float f) {
  bq_u16 h;
  asm("cvt.rp.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
#endif
// N elements (N a multiple of 8) into N / 2 bytes of codes, f taking a pair of them to its
// codes (element 0's in bits 0-3, 1's in 16-19)
template <int N, class V, class C, class F>
static __device__ __forceinline__ void bq_e2m1_pack(const V &v, C &c, F f) {
  const bq_u32 *w = (const bq_u32 *)v.e;
  bq_u32 *o = (bq_u32 *)c.e;
#pragma unroll
  for (int k = 0; k < N / 8; k++) {
    const bq_u32 t0 = f(w[4 * k]) | f(w[4 * k + 1]) << 8;
    const bq_u32 t1 = f(w[4 * k + 2]) | f(w[4 * k + 3]) << 8;
    o[k] = ((t0 | t0 >> 12) & 0xffffu) | (t1 | t1 >> 12) << 16;
  }
}
#endif
#if BQ_MX_HALF_PAIRS
// the codes of the pair w times r2 (rcp in both halves): element 0's in bits 0-3, 1's in 16-19
static __device__ __forceinline__ bq_u32 bq_e2m1_pair(bq_u32 w, bq_u32 r2) {
  const bq_u32 p = bq_h2_fma(w, r2, 0x80008000u); // x rcp (+ -0: a zero keeps its sign)
  const bq_u32 a = p & 0x7fff7fffu, c = bq_h2_min(a, BQ_H2_SIX);
  const bq_u32 hi = (c + BQ_H2_HI + ((c >> BQ_H2_SH) & 0x00010001u)) >> BQ_H2_SH;
  const bq_u32 lo = bq_h2_fma(c, 0x40004000u, BQ_H2_LOW); // (2.0: 0x4000 in both types)
  const bq_u32 m = bq_prmt(c + BQ_H2_GE1, 0u, 0xbb99u); // 0xffff in the halves where c >= 1
  const bq_u32 sign = (p & ~(a + BQ_H2_NAN) & 0x80008000u) >> 12; // (a NaN's sum sets bit 15)
  return (((hi & m) | (lo & ~m)) & 0x00070007u) | sign;
}
// N elements (N a multiple of 8) into N / 2 bytes of codes; rcp in [BQ_H2_MIN, BQ_H2_MAX] or NaN
template <int N, class V, class C>
static __device__ __forceinline__ void bq_e2m1_pairs(const V &v, float rcp, C &c) {
#if BQ_FT == BQ_TYPE_BF16
  const bq_u32 r2 = (__float_as_uint(rcp) >> 16) * 0x10001u;
#else
  const bq_u32 r2 = (bq_u32)bq_f32_to_f16(rcp) * 0x10001u;
#endif
  bq_e2m1_pack<N>(v, c, [&](bq_u32 w) { return bq_e2m1_pair(w, r2); });
}
#endif
#if BQ_MX_NV_PAIRS
// NVFP4 from bf16 or f16 under the library's rule where s.fast, two elements a step: the code
// of RN(|x| / s) in f32 counts the E2M1 midpoints m it reaches (a tie goes to the even code:
// past m for 0.25, 1.25, 2.5 and 5, at m for 0.75, 1.75 and 3.5). The f32 quotient reaches m
// where the exact one reaches mu, the midpoint between m and its f32 neighbour on that side,
// that is where |x| >= mu s; no f32 equals mu s (mu's odd part alone has 25 bits), so that is
// |x| >= RU(mu s), and for x of a half type, |x| >= RU(mu s) rounded up to the type. Seven
// such thresholds a group; each is one packed comparison for two elements (unordered: NaN
// passes all of them, code 7), counted in the low bits of BQ_H2_LOW (whose step is 1).
// s in [BQ_RCP_LO, BQ_RCP_HI]: each d s below is exact and each mu s a normal f32.
static __device__ __forceinline__ bq_u32 bq_h2_up(float t) { // t > 0, rounded up to T, in both halves
#if BQ_FT == BQ_TYPE_BF16
  return bq_prmt(__float_as_uint(t) + 0xffffu, 0u, 0x3232u);
#else
  return bq_f32_to_f16_ru(t) * 0x10001u;
#endif
}
template <int N, class V, class C>
static __device__ __forceinline__ void bq_nv_pairs(const V &v, float s, C &c) {
  const float m[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const float d[7] = {0x1p-26f, -0x1p-25f, 0x1p-24f, -0x1p-24f, 0x1p-23f, -0x1p-23f, 0x1p-22f}; // mu - m
  bq_u32 t[7];
#pragma unroll
  for (int k = 0; k < 7; k++) t[k] = bq_h2_up(__fmaf_ru(m[k], s, __fmul_rn(d[k], s)));
  bq_e2m1_pack<N>(v, c, [&](bq_u32 w) {
    const bq_u32 a = w & 0x7fff7fffu;
    bq_u32 n = BQ_H2_LOW;
#pragma unroll
    for (int k = 0; k < 7; k++) n = bq_h2_fma(bq_h2_geu(a, t[k]), BQ_H2_ONE, n);
    return (n & 0x00070007u) | (w & ~(a + BQ_H2_NAN) & 0x80008000u) >> 12; // (the sign unless NaN)
  });
}
#endif

// Bytes of y before element e of a row (E2M1: two codes a byte; the host keeps row strides
// and groups even)
#if BQ_IT == BQ_TYPE_E2M1
#define BQ_MX_YB(e) ((e) >> 1)
#else
#define BQ_MX_YB(e) (e)
#endif

// ---- where a group's scale goes -----------------------------------------------------------------
// Group g of row r's scale byte in the layout (BQ_MX_LAYOUT 0 row-major, 1 MN-major, 2 the
// blocked 128 x 4 tiles, ngroups groups a row)
static __device__ __forceinline__ bq_i64 bq_mx_sidx(bq_i64 r, bq_i64 g, bq_i64 ngroups, bq_i64 grs) {
#if BQ_MX_LAYOUT == 2
  (void)grs;
  return ((r >> 7) * ((ngroups + 3) >> 2) + (g >> 2)) * 512 + (r & 31) * 16 + ((r & 127) >> 5) * 4 + (g & 3);
#elif BQ_MX_LAYOUT == 1
  (void)ngroups;
  return g * grs + r;
#else
  (void)ngroups;
  return r * grs + g;
#endif
}

// NVFP4's tensor scale g from the tensor's amax a (f32, >= 0 or inf), by the plan's rule;
// enc, Transformer Engine's encode factor (1 / g as its rule computes it; 1 elsewhere)
static __device__ __forceinline__ float bq_mx_tensor_scale(float a, float &enc) {
#if BQ_MX_RULE == 6 // torchao: amax * f32(1 / 2688), no guard
  enc = 1.0f;
  return __fmul_rn(a, 0x1.861862p-12f);
#elif BQ_MX_RULE == 7 // Transformer Engine: the encode factor, 1 where amax is 0 or infinite
  enc = fminf(__fdiv_rn(2688.0f, a), 0x1.fffffep127f);
  enc = a == 0.0f || enc == 0.0f ? 1.0f : enc;
  return __fdiv_rn(1.0f, enc);
#else
  enc = 1.0f;
  return a == 0.0f || !(a <= 0x1.fffffep127f) ? 1.0f : __fdiv_rn(a, 2688.0f);
#endif
}
#endif
