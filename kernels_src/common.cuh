// common.cuh - types, conversions and the affine rounding rules shared by every kernel.
// Self-contained on purpose: NVRTC sees no CUDA headers on a user's machine. The host
// prepends a prelude of #defines that specializes this file (see baracuda_quant.h,
// "kernel specialization"):
//   BQ_FT   float type T: 0 f32, 1 f64, 2 f16, 3 bf16
//   BQ_IT   int type I: 0 s8, 1 u8
//   BQ_QMIN, BQ_QMAX   the q-range
//   BQ_ST   scale array element type: 0 = T, 1 = f32
// Numerics: ../NUMERICS.md of the project (README "Numerics"). Every rounding is explicit
// (__fdiv_rn, __fmul_rn, ...), so no compiler option can change a result.

typedef unsigned char bq_u8;
typedef unsigned short bq_u16;
typedef unsigned int bq_u32;
typedef long long bq_i64;
typedef unsigned long long bq_u64;

#if BQ_FT == 1
typedef double bq_c; // compute type C
#else
typedef float bq_c;
#endif

#if BQ_FT == 0
typedef float bq_t;
#elif BQ_FT == 1
typedef double bq_t;
#else
typedef bq_u16 bq_t; // f16 / bf16 bits
#endif

#if BQ_IT == 0
typedef signed char bq_i;
#else
typedef unsigned char bq_i;
#endif

#if BQ_ST == 1
typedef float bq_s; // scale array element
#else
typedef bq_t bq_s;
#endif

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
static __device__ __forceinline__ float bq_bf16_to_f32(bq_u16 h) {
  return __uint_as_float(((bq_u32)h) << 16);
}
static __device__ __forceinline__ bq_u16 bq_f32_to_bf16(float f) {
  bq_u16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

// T <-> C. T -> C is exact; C -> T rounds to nearest even.
static __device__ __forceinline__ bq_c bq_to_c(bq_t v) {
#if BQ_FT == 2
  return bq_f16_to_f32(v);
#elif BQ_FT == 3
  return bq_bf16_to_f32(v);
#else
  return v;
#endif
}
static __device__ __forceinline__ bq_t bq_from_c(bq_c v) {
#if BQ_FT == 2
  return bq_f32_to_f16(v);
#elif BQ_FT == 3
  return bq_f32_to_bf16(v);
#else
  return v;
#endif
}
static __device__ __forceinline__ bq_c bq_scale_to_c(bq_s v) {
#if BQ_ST == 1
  return v;
#else
  return bq_to_c(v);
#endif
}

#if BQ_FT == 1
static __device__ __forceinline__ bq_c bq_div(bq_c a, bq_c b) { return __ddiv_rn(a, b); }
static __device__ __forceinline__ bq_c bq_mul(bq_c a, bq_c b) { return __dmul_rn(a, b); }
static __device__ __forceinline__ bq_c bq_add(bq_c a, bq_c b) { return __dadd_rn(a, b); }
static __device__ __forceinline__ bq_i64 bq_rne_ll(bq_c v) { return __double2ll_rn(v); }
static __device__ __forceinline__ bq_c bq_from_ll(bq_i64 v) { return __ll2double_rn(v); }
#define BQ_CLAMP_BIG 0x1p40
#else
static __device__ __forceinline__ bq_c bq_div(bq_c a, bq_c b) { return __fdiv_rn(a, b); }
static __device__ __forceinline__ bq_c bq_mul(bq_c a, bq_c b) { return __fmul_rn(a, b); }
static __device__ __forceinline__ bq_c bq_add(bq_c a, bq_c b) { return __fadd_rn(a, b); }
static __device__ __forceinline__ bq_i64 bq_rne_ll(bq_c v) { return __float2ll_rn(v); }
static __device__ __forceinline__ bq_c bq_from_ll(bq_i64 v) { return __ll2float_rn(v); }
#define BQ_CLAMP_BIG 0x1p40f
#endif

// rne(v) as an integer with NaN -> 0, clamped to +-2^40 so that adding any int32 zero
// point can neither wrap nor change which side of the q-range the result falls on.
static __device__ __forceinline__ bq_i64 bq_round(bq_c v) {
  v = (v == v) ? v : (bq_c)0;
  v = v < -BQ_CLAMP_BIG ? -BQ_CLAMP_BIG : (v > BQ_CLAMP_BIG ? BQ_CLAMP_BIG : v);
  return bq_rne_ll(v);
}

// quantize: q = sat(rne(x / s) + zp, qmin, qmax)
static __device__ __forceinline__ int bq_quantize(bq_c x, bq_c s, int zp) {
  bq_i64 r = bq_round(bq_div(x, s)) + zp;
  r = r < BQ_QMIN ? BQ_QMIN : (r > BQ_QMAX ? BQ_QMAX : r);
  return (int)r;
}
// dequantize: (q - zp) exact in integer, one rounding to C, one product in C.
static __device__ __forceinline__ bq_c bq_dequantize(int q, bq_c s, int zp) {
  return bq_mul(bq_from_ll((bq_i64)q - zp), s);
}
// STE mask: qmin <= rne(x / s) + zp <= qmax, before saturation; 0 for NaN.
static __device__ __forceinline__ bool bq_in_range(bq_c x, bq_c s, int zp) {
  bq_c v = bq_div(x, s);
  bq_i64 r = bq_round(v) + zp;
  return (v == v) && r >= BQ_QMIN && r <= BQ_QMAX;
}

// 32-bit division by a run-time constant: one multiply-high and a shift (valid for any
// n < 2^32). The host computes (magic, shift) for the divisor.
// 64-bit division, out of line: it is the rare path (indices past 2^31), and one copy of
// its code keeps the compile fast.
static __device__ __noinline__ bq_i64 bq_div64(bq_i64 a, bq_i64 b) { return a / b; }

struct bq_fastdiv {
  bq_u32 d, magic, shift;
};
static __device__ __forceinline__ bq_u32 bq_div_u32(bq_u32 n, bq_fastdiv f) {
  bq_u32 t = __umulhi(n, f.magic);
  return (bq_u32)(((bq_u64)t + n) >> f.shift);
}
