// fused.cu - a producer fused with its quantize: (residual add +) RMSNorm, or act(gate) *
// up, whose T values are then quantized as the existing ops would: static per tensor, or
// dynamic per token or per group (docs/numerics.md, "Fused producers").
// Prelude defines (besides common.cuh's): BQ_OP (BQ_OP_RMSNORM_QUANTIZE or
// BQ_OP_GATED_QUANTIZE), BQ_ACT (BQ_ACT_SILU or BQ_ACT_GELU_TANH; gated only), BQ_GRAN
// (BQ_GRAN_TENSOR, BQ_GRAN_TOKEN or BQ_GRAN_GROUP), BQ_ASYM (dynamic: 1 asymmetric).
//
// A block of TPR threads takes a row. Access a of a row holds its elements [a V, a V + V)
// (V = BQ_VEC, 16 bytes of T). The contract fixes RMSNorm's sum of squares over 256 lanes
// (BQ_THREADS): lane l adds the accesses l, l + 256, l + 512, ... in order. Thread t of a
// block of TPR threads takes the accesses t, t + TPR, t + 2 TPR, ... and keeps a partial
// sum for each of its 256 / TPR lanes (t, t + TPR, ...), so the sum is the same whatever
// the number of rows, the grid, the block or the entry point.
// bq_fused_c1 .. bq_fused_c8 (256 threads) and bq_fused_m4 .. bq_fused_m16 (128 threads: fewer
// warps a row, so that a row's fixed work, its reductions, is shared by more elements) keep
// a row of up to TPR CPT accesses in registers from its load to its quantize: one read of
// DRAM. The 128-thread entries take dense rows only (DENSE: every stream 16-byte aligned,
// whole accesses; a residual only in bq_fused_m4 and bq_fused_m4f), so they carry no
// element path, nor does bq_fused_c2d or bq_fused_c8d (dense rows, a residual allowed);
// bq_fused_m4f and bq_fused_m8f take rows of exactly TPR CPT accesses (FULL: no access is
// checked against the row's end). In 256-thread blocks a row's rstd and scale are computed
// once, by thread 0, and read by the block. bq_fused_long takes any row in batches of 256 BQ_LONG_CPT
// accesses and reads the row again for each pass it needs (from L2); bq_fused_staged copies
// long rows into shared memory ahead of their use (cp.async, two slots).
// Rows whose streams all start 16 bytes aligned (p.aligned) move in 16-byte accesses;
// others element by element, with the same results.
// Per group, groups of gc accesses (gc a power of two up to 32) lie in gc consecutive lanes
// of a warp, which reduce them with shuffles; any other group size takes a generic pass in
// which a thread takes a group and recomputes its values from memory.
// BQ_ACT_TAB (gated, T = bf16): act(g) is read from a table of the contract's values in
// shared memory rather than computed (see "the activation's table" below).
// Microscaling output (BQ_MX_RULE defined, with BQ_MX_LAYOUT; common.cuh's conversions and
// rules): per group, each group's scale a byte (UE8M0, or NVFP4's E4M3 times the tensor scale
// g) written in the layout, E2M1 codes two a byte; the blocked layout's padding written 0 by
// the blocks of the rows (see "microscaling" below). NVFP4 with g computed takes two launches
// of bq_fused_amax first, for the tensor's amax.

#define BQ_THREADS 256
#define BQ_LONG_CPT 4
#define BQ_RMS (BQ_OP == BQ_OP_RMSNORM_QUANTIZE)
#ifdef BQ_MX_RULE
#define BQ_FMX 1 // microscaling output
#define BQ_FYB(e) BQ_MX_YB(e) // bytes of y before element e of a row
#ifndef BQ_FMX_PAIRS
#define BQ_FMX_PAIRS 1 // E2M1 from 16-bit data: common.cuh's pairs where the scale allows
#endif
#else
#define BQ_FMX 0
#define BQ_FYB(e) (e)
#endif

#include "fused_abi.h" // the entry points and parameter block, which the host compiles too

// ---- the math of the contract: every operation one rounding in C ---------------------
#if BQ_FT == BQ_TYPE_F64
#define BQ_LOG2E 0x1.71547652b82fep+0
#define BQ_SHIFTER 0x1.8p+52
#define BQ_LN2_HI 0x1.62e42feep-1
#define BQ_LN2_LO 0x1.a39ef35793c76p-33
#define BQ_EXP_XMAX 710.0
#define BQ_EXP_XMIN (-746.0)
#define BQ_TANH_A0 0.5625
#define BQ_TANH_SAT 20.0
#define BQ_GELU_K0 0x1.9884533d43651p-1
#define BQ_GELU_K1 0x1.6e4e26d4801f7p-5
#define BQ_EXP_N 12
#define BQ_TANH_N 11
static __device__ __forceinline__ bq_c bq_pow2(int j) { return __longlong_as_double((bq_i64)(j + 1023) << 52); }
static __device__ __forceinline__ bq_c bq_sqrt(bq_c a) { return __dsqrt_rn(a); }
#define BQ_INF __longlong_as_double(0x7ff0000000000000LL)
#else
#define BQ_LOG2E 0x1.715476p+0f
#define BQ_SHIFTER 0x1.8p+23f
#define BQ_LN2_HI 0x1.62e4p-1f
#define BQ_LN2_LO 0x1.7f7d1cp-20f
#define BQ_EXP_XMAX 89.0f
#define BQ_EXP_XMIN (-104.0f)
#define BQ_TANH_A0 0.5625f
#define BQ_TANH_SAT 10.0f
#define BQ_GELU_K0 0x1.988454p-1f
#define BQ_GELU_K1 0x1.6e4e26p-5f
#define BQ_EXP_N 6
#define BQ_TANH_N 6
static __device__ __forceinline__ bq_c bq_pow2(int j) { return __uint_as_float((bq_u32)(j + 127) << 23); }
static __device__ __forceinline__ bq_c bq_sqrt(bq_c a) { return __fsqrt_rn(a); }
#define BQ_INF __uint_as_float(0x7f800000u)
#endif

#if !BQ_RMS
// exp_c's reduction and polynomial for x in [XMIN, XMAX]: exp(x) = 2^k (1 + m). k is read
// from the bits of t + SHIFTER (an integer in its last place), the very value the
// contract's kf = (t + SHIFTER) - SHIFTER names, without a conversion.
static __device__ __forceinline__ bq_c bq_exp_core(bq_c x, int &k) {
#if BQ_FT == BQ_TYPE_F64
  const bq_c c[BQ_EXP_N] = {0x1.0p-1, 0x1.5555555555555p-3, 0x1.5555555555555p-5, 0x1.1111111111111p-7,
                            0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-13, 0x1.a01a01a01a01ap-16,
                            0x1.71de3a556c734p-19, 0x1.27e4fb7789f5cp-22, 0x1.ae64567f544e4p-26,
                            0x1.1eed8eff8d898p-29, 0x1.6124613a86d09p-33};
#else
  const bq_c c[BQ_EXP_N] = {0x1.0p-1f, 0x1.555556p-3f, 0x1.555556p-5f, 0x1.111112p-7f, 0x1.6c16c2p-10f,
                            0x1.a01a02p-13f};
#endif
  const bq_c u = bq_add(bq_mul(x, BQ_LOG2E), BQ_SHIFTER);
  const bq_c kf = bq_sub(u, BQ_SHIFTER);
  const bq_c r = bq_sub(bq_sub(x, bq_mul(kf, BQ_LN2_HI)), bq_mul(kf, BQ_LN2_LO));
  bq_c q = c[BQ_EXP_N - 1];
#pragma unroll
  for (int n = BQ_EXP_N - 2; n >= 0; n--) q = bq_add(bq_mul(q, r), c[n]);
#if BQ_FT == BQ_TYPE_F64
  k = (int)(__double_as_longlong(u) - __double_as_longlong(BQ_SHIFTER));
#else
  k = (int)(__float_as_uint(u) - __float_as_uint(BQ_SHIFTER));
#endif
  return bq_add(r, bq_mul(bq_mul(r, r), q));
}
// exp_c without branches: the formula on x clamped into [XMIN, XMAX], then the special
// values selected (NaN, and past either clamp, where the contract answers directly).
static __device__ __forceinline__ bq_c bq_exp_c(bq_c x) {
  const bq_c xc = bq_min(bq_max(x, BQ_EXP_XMIN), BQ_EXP_XMAX);
  int k;
  const bq_c e = bq_add((bq_c)1, bq_exp_core(xc, k));
  const int k1 = (k - (k >> 31)) >> 1; // k / 2, rounded toward zero
  bq_c y = bq_mul(bq_mul(e, bq_pow2(k1)), bq_pow2(k - k1));
  y = x > BQ_EXP_XMAX ? BQ_INF : y;
  y = x < BQ_EXP_XMIN ? (bq_c)0 : y;
  return x != x ? bq_add(x, x) : y;
}
// tanh_c without branches: both of the contract's formulas (the second on a clamped to SAT),
// then the one for a selected.
static __device__ __forceinline__ bq_c bq_tanh_c(bq_c y) {
#if BQ_FT == BQ_TYPE_F64
  const bq_c P[BQ_TANH_N] = {-0x1.5555555555555p-2, 0x1.1111111110fbep-3, -0x1.ba1ba1b9f19ap-5,
                             0x1.664f48727bbfdp-6, -0x1.226e32212f8e9p-7, 0x1.d6d30f918e945p-9,
                             -0x1.7d9545835e3e5p-10, 0x1.34ad2f7abd75ap-11, -0x1.eaf47874aab53p-13,
                             0x1.616f17dcc6fd8p-14, -0x1.4ffe31971aeb8p-16};
#else
  const bq_c P[BQ_TANH_N] = {-0x1.555556p-2f, 0x1.111102p-3f, -0x1.ba12d8p-5f, 0x1.655dcp-6f, -0x1.1680dcp-7f,
                             0x1.460e8p-9f};
#endif
  const bq_c a = bq_abs(y);
  // a < A0: a + a (s P(s)), s = a^2
  const bq_c s = bq_mul(a, a);
  bq_c q = P[BQ_TANH_N - 1];
#pragma unroll
  for (int n = BQ_TANH_N - 2; n >= 0; n--) q = bq_add(bq_mul(q, s), P[n]);
  const bq_c t0 = bq_add(a, bq_mul(a, bq_mul(s, q)));
  // A0 <= a <= SAT: 1 - 2 / (expm1(2a) + 2)
  const bq_c ac = bq_min(bq_max(a, BQ_TANH_A0), BQ_TANH_SAT);
  int k;
  const bq_c m = bq_exp_core(bq_add(ac, ac), k), p2 = bq_pow2(k);
  const bq_c e = bq_add(bq_sub(p2, (bq_c)1), bq_mul(p2, m));
  const bq_c t1 = bq_sub((bq_c)1, bq_div((bq_c)2, bq_add(e, (bq_c)2)));
  bq_c t = a < BQ_TANH_A0 ? t0 : (a <= BQ_TANH_SAT ? t1 : (bq_c)1);
  t = y < (bq_c)0 ? -t : t;
  t = y == (bq_c)0 ? y : t;
  return y != y ? bq_add(y, y) : t;
}
static __device__ __forceinline__ bq_c bq_act(bq_c g) {
#if BQ_ACT == BQ_ACT_SILU
  return bq_div(g, bq_add((bq_c)1, bq_exp_c(-g)));
#else
  const bq_c inner = bq_add(g, bq_mul(bq_mul((bq_c)BQ_GELU_K1, g), bq_mul(g, g)));
  const bq_c t = bq_tanh_c(bq_mul((bq_c)BQ_GELU_K0, inner));
  return bq_mul(bq_mul((bq_c)0.5, g), bq_add((bq_c)1, t));
#endif
}
#endif

// ---- the activation's table (BQ_ACT_TAB) ------------------------------------------------
// A bf16 gate has 2^16 values, so act(C(g)) can be looked up instead of computed: the
// contract's formula costs several times the instructions a DRAM pass leaves for it. The
// table holds act(g), computed by bq_act itself, for every bf16 g whose exponent field is
// in [BQ_ACT_E0, BQ_ACT_E0 + 32), |g| in [2^-25, 2^7): entry (sign, exponent - E0,
// mantissa). Any other g (zeros, tiny, huge, inf, NaN) is computed with the formula, an
// access at a time where one of its values needs it. The values, and so the results, are
// the formula's, bit for bit.
// Each block copies the table into the first BQ_ACT_BYTES of its dynamic shared memory
// (the host launches as many blocks as fit at once, so this is once a block, not once a
// row) with cp.async, every copy in flight at once (a loop of loads, each waited on in
// turn, held every block of a launch about 10 us before its first row). The first blocks
// of a module's first launch find no table in global memory yet: they compute their copy,
// and the first of them to claim bq_act_state publishes it.
#if BQ_ACT_TAB
#define BQ_ACT_E0 102
#define BQ_ACT_N 8192
#define BQ_ACT_BYTES (BQ_ACT_N * 4)
__device__ __align__(16) float bq_act_global[BQ_ACT_N]; // (16: cp.async's copies)
__device__ int bq_act_state; // 0: not published, 1: being published, 2: published
#ifdef BQ_EMULATED
static inline int bq_act_state_get() { return bq_act_state; }
static inline bool bq_act_claim() { return bq_act_state == 0 ? (bq_act_state = 1, true) : false; }
static inline void bq_act_publish() { bq_act_state = 2; }
static inline void bq_act_copy(float *tab) {
  for (int i = threadIdx.x; i < BQ_ACT_N; i += blockDim.x) tab[i] = bq_act_global[i];
}
static inline float *bq_act_smem() { return (float *)emu.smem; }
#else
static __device__ __forceinline__ int bq_act_state_get() {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(&bq_act_state) : "memory");
  return v;
}
static __device__ __forceinline__ bool bq_act_claim() {
  int old;
  asm volatile("atom.acq_rel.gpu.global.cas.b32 %0, [%1], 0, 1;" : "=r"(old) : "l"(&bq_act_state) : "memory");
  return old == 0;
}
static __device__ __forceinline__ void bq_act_publish() {
  asm volatile("st.release.gpu.global.b32 [%0], 2;" ::"l"(&bq_act_state) : "memory");
}
// the published table into the block's copy: read through L2 (cp.async.cg), as another
// block wrote it during this launch, so neither L1 nor the read-only path may hold it
static __device__ __forceinline__ void bq_act_copy(float *tab) {
  const bq_u32 s0 = bq_smem_addr(tab);
  for (int i = threadIdx.x; i < BQ_ACT_N / 4; i += blockDim.x) bq_cp_async16(s0 + (bq_u32)i * 16u, bq_act_global + 4 * i, 16);
  bq_cp_commit();
  bq_cp_wait<0>();
}
extern __shared__ __align__(128) unsigned char bq_act_dsmem[];
static __device__ __forceinline__ float *bq_act_smem() { return (float *)bq_act_dsmem; }
#endif
// the gate of entry i
static __device__ __forceinline__ bq_c bq_act_arg(int i) {
  const bq_u32 b = ((bq_u32)(i >> 12) << 15) | (((bq_u32)BQ_ACT_E0 << 7) + (bq_u32)(i & 4095));
  return __uint_as_float(b << 16);
}
static __device__ void bq_act_fill() {
  __shared__ int claimed;
  float *tab = bq_act_smem();
  const bool published = bq_act_state_get() == 2;
  if (published) bq_act_copy(tab);
  else
    for (int i = threadIdx.x; i < BQ_ACT_N; i += blockDim.x) tab[i] = bq_act(bq_act_arg(i));
  if (threadIdx.x == 0) claimed = !published && bq_act_claim();
  __syncthreads();
  if (claimed) {
    for (int i = threadIdx.x; i < BQ_ACT_N; i += blockDim.x) bq_act_global[i] = tab[i];
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) bq_act_publish();
  }
}
// the formula, for the rare access that holds a gate outside the table
static __device__ __noinline__ bq_c bq_act_far(bq_c g) { return bq_act(g); }
// A gate's f32 bits are its bf16 bits << 16: d, its exponent and mantissa less the table's
// first, is below 4096 << 16 in the table, and its entry's byte offset is d >> 14, plus
// 16 KiB for a negative gate.
static __device__ __forceinline__ bq_u32 bq_act_d(bq_u32 u) { return (u & 0x7fff0000u) - ((bq_u32)BQ_ACT_E0 << 23); }
// act of an access's gates (T values in C). An access whose d all lie in the table (their
// OR below 2^28) takes no branch.
static __device__ __forceinline__ void bq_act_chunk(bq_c (&c)[BQ_VEC]) {
  const unsigned char *tab = (const unsigned char *)bq_act_smem();
  bq_u32 any = 0;
  bq_c a[BQ_VEC];
#pragma unroll
  for (int j = 0; j < BQ_VEC; j++) {
    const bq_u32 u = __float_as_uint(c[j]), d = bq_act_d(u);
    any |= d;
    a[j] = *(const float *)(tab + (((d >> 14) & 0x3ffcu) + ((u >> 31) << 14)));
  }
  if (any >> 28) {
#pragma unroll
    for (int j = 0; j < BQ_VEC; j++)
      if (bq_act_d(__float_as_uint(c[j])) >= (4096u << 16)) a[j] = bq_act_far(c[j]);
  }
#pragma unroll
  for (int j = 0; j < BQ_VEC; j++) c[j] = a[j];
}
#else
#define BQ_ACT_BYTES 0
#endif

// ---- C values rounded to T: two at a time where T has 16 bits (one packed conversion, the
// same rounding as two) ------------------------------------------------------------------
static __device__ __forceinline__ void bq_round_chunk(const bq_c (&c)[BQ_VEC], bq_xchunk &o) {
#if !defined(BQ_EMULATED) && (BQ_FT == BQ_TYPE_BF16 || BQ_FT == BQ_TYPE_F16)
#pragma unroll
  for (int j = 0; j < BQ_VEC; j += 2) {
    bq_u32 w; // cvt.rn.{bf16x2,f16x2}.f32 puts its first source in the upper half
#if BQ_FT == BQ_TYPE_BF16
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(c[j + 1]), "f"(c[j]));
#else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(c[j + 1]), "f"(c[j]));
#endif
    ((bq_u32 *)&o)[j / 2] = w; // elements j, j + 1
  }
#else
#pragma unroll
  for (int j = 0; j < BQ_VEC; j++) o.e[j] = bq_from_c(c[j]);
#endif
}

// T values of a chunk in C (exact). A bf16 pair's word widens with two bit operations: the
// low half shifted up, the high half masked.
static __device__ __forceinline__ void bq_chunk_c(const bq_xchunk &x, bq_c (&c)[BQ_VEC]) {
#if !defined(BQ_EMULATED) && BQ_FT == BQ_TYPE_BF16
  const bq_u32 *w = (const bq_u32 *)&x;
#pragma unroll
  for (int j = 0; j < BQ_VEC / 2; j++) {
    c[2 * j] = __uint_as_float(w[j] << 16);
    c[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
  }
#else
#pragma unroll
  for (int j = 0; j < BQ_VEC; j++) c[j] = bq_to_c(x.e[j]);
#endif
}

// h = T(C(x) + C(r)), into x's chunk. For a 16-bit T one packed fma (x * 1 + r) a pair gives
// the same bits: C = f32 carries at least twice T's precision plus two bits, so rounding
// the sum to f32 and then to T equals rounding it to T once (double rounding is innocuous).
static __device__ __forceinline__ void bq_add_chunk(bq_xchunk &h, const bq_xchunk &v) {
#if !defined(BQ_EMULATED) && (BQ_FT == BQ_TYPE_BF16 || BQ_FT == BQ_TYPE_F16)
  bq_u32 *hp = (bq_u32 *)&h;
  const bq_u32 *vp = (const bq_u32 *)&v;
#pragma unroll
  for (int j = 0; j < BQ_VEC / 2; j++) {
#if BQ_FT == BQ_TYPE_BF16
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(hp[j]) : "r"(hp[j]), "r"(0x3f803f80u), "r"(vp[j]));
#else
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(hp[j]) : "r"(hp[j]), "r"(0x3c003c00u), "r"(vp[j]));
#endif
  }
#else
  bq_c c[BQ_VEC];
#pragma unroll
  for (int j = 0; j < BQ_VEC; j++) c[j] = bq_add(bq_to_c(h.e[j]), bq_to_c(v.e[j]));
  bq_round_chunk(c, h);
#endif
}

// ---- one access of a row: elements [a V, a V + V) past D read as 0, never written -------
// x and the residual are read once, with the default cache policy (streaming them, ld.cs,
// measured 2-3% slower on the H100 in every large row); the weight stays cached for every
// row. CS streams them all the same (bq_fused_m8f: ptxas schedules the plain loads
// differently there, and it spills).
// DENSE: the caller knows the stream's rows are 16-byte aligned and D a multiple of V.
template <bool KEEP, bool DENSE = false, bool CS = false>
static __device__ __forceinline__ void bq_fload(bq_xchunk &c, const bq_t *row, int a, int D, bool aligned) {
  const int e0 = a * BQ_VEC;
  if (DENSE || (aligned && e0 + BQ_VEC <= D)) {
    if (KEEP) *(uint4 *)&c = __ldg((const uint4 *)(row + e0));
    else if (CS) bq_load(c, row + e0, 16);
    else {
      BQ_EMU_ALIGNED(row + e0, 16); // (the emulator's check; nothing on a GPU)
      *(uint4 *)&c = *(const uint4 *)(row + e0);
    }
  } else {
#pragma unroll
    for (int j = 0; j < BQ_VEC; j++) c.e[j] = e0 + j < D ? row[e0 + j] : (bq_t)0;
  }
}
template <bool DENSE = false>
static __device__ __forceinline__ void bq_fstore(bq_t *row, const bq_xchunk &c, int a, int D, bool aligned) {
  const int e0 = a * BQ_VEC;
  if (DENSE || (aligned && e0 + BQ_VEC <= D)) {
    bq_store(row + e0, c, 16);
  } else {
#pragma unroll
    for (int j = 0; j < BQ_VEC; j++)
      if (e0 + j < D) row[e0 + j] = c.e[j];
  }
}
// w: the widest access y's row allows (its start's alignment; accesses keep it)
static __device__ __forceinline__ int bq_qwidth(const bq_i *row) {
  const int w = bq_width(row);
  return w < (int)sizeof(bq_qchunk) ? w : (int)sizeof(bq_qchunk);
}
template <bool DENSE = false>
static __device__ __forceinline__ void bq_qstore(bq_i *row, const bq_qchunk &o, int a, int D, int w) {
  const int e0 = a * BQ_VEC;
  if (DENSE || e0 + BQ_VEC <= D) {
    bq_store(row + e0, o, w);
  } else {
#pragma unroll
    for (int j = 0; j < BQ_VEC; j++)
      if (e0 + j < D) row[e0 + j] = o.e[j];
  }
}

// ---- the producers, an access at a time -----------------------------------------------
#if BQ_RMS
// h = T(C(x) + C(residual)), written back to the residual, an access at a time (x already
// in h)
template <bool DENSE>
static __device__ __forceinline__ void bq_rms_res1(const bq_fused_params &p, bq_i64 r, int a, bq_xchunk &h) {
  bq_t *rr = (bq_t *)p.res + r * p.rs;
  bq_xchunk v;
  bq_fload<false, DENSE>(v, rr, a, p.cols, p.aligned);
  bq_add_chunk(h, v);
  bq_fstore<DENSE>(rr, h, a, p.cols, p.aligned);
}
// The same for both accesses b + t + i TPR a thread of bq_fused_c1 or _c2 holds, both
// loads before the stores: a store to the residual may alias x (in place) or a later
// load, so the access-at-a-time form waits for each access's loads in turn. (Wider
// entries keep that form: the loads' registers made them spill.)
template <int TPR, int CPT, bool DENSE, bool FULL>
static __device__ __forceinline__ void bq_rms_res(const bq_fused_params &p, bq_i64 r, int b, int nacc,
                                                  bq_xchunk (&v)[CPT]) {
  bq_t *rr = (bq_t *)p.res + r * p.rs;
  bq_xchunk u[CPT];
#pragma unroll
  for (int i = 0; i < CPT; i++) {
    const int a = b + (int)threadIdx.x + i * TPR;
    if (FULL || a < nacc) bq_fload<false, DENSE>(u[i], rr, a, p.cols, p.aligned);
  }
#pragma unroll
  for (int i = 0; i < CPT; i++) {
    const int a = b + (int)threadIdx.x + i * TPR;
    if (FULL || a < nacc) {
      bq_add_chunk(v[i], u[i]);
      bq_fstore<DENSE>(rr, v[i], a, p.cols, p.aligned);
    }
  }
}
// n = T((C(h) * rstd) * C(w)), in place
// (red: the values before their rounding to T are reduced; see bq_red_round)
static __device__ __forceinline__ void bq_rms_nw(bq_xchunk &h, const bq_xchunk w, bq_c rstd, bq_red &red) {
  bq_c c[BQ_VEC], wc[BQ_VEC];
  bq_chunk_c(h, c);
  bq_chunk_c(w, wc);
#pragma unroll
  for (int j = 0; j < BQ_VEC; j++) {
    c[j] = bq_mul(bq_mul(c[j], rstd), wc[j]);
    bq_red_add(red, c[j]);
  }
  bq_round_chunk(c, h);
}
template <bool DENSE>
static __device__ __forceinline__ void bq_rms_n(const bq_fused_params &p, int a, bq_xchunk &h, bq_c rstd, bq_red &red) {
  bq_xchunk w;
  bq_fload<true, DENSE>(w, (const bq_t *)p.w, a, p.cols, p.aligned);
  bq_rms_nw(h, w, rstd, red);
}
// n again, from h in memory (the residual buffer, or x)
static __device__ __forceinline__ void bq_value(const bq_fused_params &p, bq_i64 r, int a, bq_c rstd, bq_xchunk &v,
                                                bq_red &red) {
  if (p.res) bq_fload<false>(v, (const bq_t *)p.res + r * p.rs, a, p.cols, p.aligned);
  else bq_fload<false>(v, (const bq_t *)p.x + r * p.xs, a, p.cols, p.aligned);
  bq_rms_n<false>(p, a, v, rstd, red);
}
static __device__ __forceinline__ bq_t bq_value_at(const bq_fused_params &p, bq_i64 r, int e, bq_c rstd) {
  const bq_t h = p.res ? ((const bq_t *)p.res)[r * p.rs + e] : ((const bq_t *)p.x)[r * p.xs + e];
  return bq_from_c(bq_mul(bq_mul(bq_to_c(h), rstd), bq_to_c(((const bq_t *)p.w)[e])));
}
#else
// a = T(act(C(gate)) * C(up)), into the gate's chunk
static __device__ __forceinline__ void bq_gate(bq_xchunk &g, const bq_xchunk &u, bq_red &red) {
  bq_c c[BQ_VEC], uc[BQ_VEC];
  bq_chunk_c(g, c);
  bq_chunk_c(u, uc);
#if BQ_ACT_TAB
  bq_act_chunk(c);
#else
#pragma unroll
  for (int j = 0; j < BQ_VEC; j++) c[j] = bq_act(c[j]);
#endif
#pragma unroll
  for (int j = 0; j < BQ_VEC; j++) {
    c[j] = bq_mul(c[j], uc[j]);
    bq_red_add(red, c[j]);
  }
  bq_round_chunk(c, g);
}
template <bool DENSE = false>
static __device__ __forceinline__ void bq_value(const bq_fused_params &p, bq_i64 r, int a, bq_c rstd, bq_xchunk &v,
                                                bq_red &red) {
  (void)rstd;
  const bq_t *g = (const bq_t *)p.x + r * p.xs;
  bq_xchunk u;
  bq_fload<false, DENSE>(v, g, a, p.cols, p.aligned);
  bq_fload<false, DENSE>(u, g + p.cols, a, p.cols, p.aligned);
  bq_gate(v, u, red);
}
static __device__ __forceinline__ bq_t bq_value_at(const bq_fused_params &p, bq_i64 r, int e, bq_c rstd) {
  (void)rstd;
  const bq_t *g = (const bq_t *)p.x + r * p.xs;
  return bq_from_c(bq_mul(bq_act(bq_to_c(g[e])), bq_to_c(g[p.cols + e])));
}
#endif

// ---- the block's reductions -----------------------------------------------------------
#if BQ_RMS
// rstd from the partial sums of squares of the contract's lanes this thread holds (lane
// t + j TPR in v[j]): the contract's xor butterfly in each warp, then the 8 warps' sums
// left to right (lane t + j TPR is in the contract's warp t / 32 + j TPR / 32).
template <int TPR>
static __device__ __forceinline__ bq_c bq_rstd(const bq_fused_params &p, bq_c (&v)[BQ_THREADS / TPR], bq_c *ss_smem) {
#pragma unroll
  for (int j = 0; j < BQ_THREADS / TPR; j++) {
#pragma unroll
    for (int o = 16; o >= 1; o >>= 1) v[j] = bq_add(v[j], __shfl_xor_sync(0xffffffffu, v[j], o));
    if ((threadIdx.x & 31) == 0) ss_smem[(threadIdx.x >> 5) + j * (TPR / 32)] = v[j];
  }
  __syncthreads();
  // 256-thread blocks: thread 0 alone, into the slot after the warps' (ss_smem holds
  // BQ_THREADS / 32 + 1), so that 7 warps fewer spend issue slots on it; narrower blocks, with
  // fewer warps to hide a lone thread's latency, each thread.
  constexpr bool ONE = TPR == BQ_THREADS;
  bq_c rs = 0;
  if (!ONE || threadIdx.x == 0) {
    bq_c ss = ss_smem[0];
#pragma unroll
    for (int w = 1; w < BQ_THREADS / 32; w++) ss = bq_add(ss, ss_smem[w]);
    const bq_c mean = bq_div(ss, (bq_c)p.cols);
    rs = bq_div((bq_c)1, bq_sqrt(bq_add(mean, (bq_c)p.eps)));
    if (ONE) ss_smem[BQ_THREADS / 32] = rs;
  }
  __syncthreads(); // (the slots are rewritten after the block's next barrier, once all have read)
  return ONE ? ss_smem[BQ_THREADS / 32] : rs;
}
// adds an access's squares to a lane's partial sum (elements past D are 0 and add nothing).
// A bf16 pair widens here by byte permutes: the same values as bq_chunk_c's, in a form the
// compiler does not merge with the normalizing pass's, so that the row stays packed in
// registers between the two passes.
static __device__ __forceinline__ void bq_add_squares(bq_c &ss, const bq_xchunk &h) {
  bq_c c[BQ_VEC];
#if !defined(BQ_EMULATED) && BQ_FT == BQ_TYPE_BF16
  const bq_u32 *w = (const bq_u32 *)&h;
#pragma unroll
  for (int j = 0; j < BQ_VEC / 2; j++) {
    c[2 * j] = __uint_as_float(__byte_perm(w[j], 0u, 0x1044u));
    c[2 * j + 1] = __uint_as_float(__byte_perm(w[j], 0u, 0x3244u));
  }
#else
  bq_chunk_c(h, c);
#endif
#pragma unroll
  for (int j = 0; j < BQ_VEC; j++) ss = bq_add(ss, bq_mul(c[j], c[j]));
}
#endif

// The reductions see the producer's values before they are rounded to T. Rounding to
// nearest is monotone and keeps 0, so the extremes of the rounded values are the rounded
// extremes (NaN ignored either way): one rounding a row or group instead of one an element.
static __device__ __forceinline__ bq_red bq_red_round(bq_red r) {
  r.a = bq_to_c(bq_from_c(r.a));
  r.b = bq_to_c(bq_from_c(r.b));
  return r;
}

// an access's T values quantized with a static scale (per tensor)
static __device__ __forceinline__ void bq_quantize_static(const bq_xchunk &v, bq_qchunk &o, const bq_scale &s,
                                                          const bq_zp &z) {
  bq_c c[BQ_VEC];
  bq_chunk_c(v, c);
#pragma unroll
  for (int j = 0; j < BQ_VEC; j++) o.e[j] = (bq_i)bq_quantize(c[j], s, z);
}

#if BQ_GRAN != BQ_GRAN_TENSOR
static __device__ __forceinline__ void bq_fused_params_out(const bq_fused_params &p, bq_i64 i, const bq_qp &q) {
  ((bq_s *)p.scales)[i] = q.stored;
#if BQ_ASYM
  ((int *)p.zps)[i] = q.zp;
#endif
}
#endif
#if BQ_GRAN == BQ_GRAN_GROUP
// A row's groups on the fast path (p.fast_groups): a group is gc = 2^gsh accesses in gc
// consecutive lanes, this thread its sub-th; access a's group is a >> gsh. The row's first
// scale (and zero point) is found once a row, not once an access.
struct bq_gshape {
  int gc, sub, gsh;
  bq_s *scales; // the row's
#if BQ_ASYM
  int *zps;
#endif
#if BQ_FMX
  bq_u8 *sb;          // the scales' bytes (the layout indexes them)
  bq_i64 r, ngroups, grs;
  float g, enc;       // NVFP4's tensor scale and Transformer Engine's encode factor (else 1)
#endif
};
static __device__ __forceinline__ bq_gshape bq_gshape_of(const bq_fused_params &p, bq_i64 r) {
  bq_gshape g;
  g.gc = (int)(p.group / BQ_VEC);
  g.sub = threadIdx.x & (g.gc - 1);
  g.gsh = 31 - __clz(g.gc); // log2 gc wherever fast_groups holds
  g.scales = (bq_s *)p.scales + r * p.grs;
#if BQ_ASYM
  g.zps = (int *)p.zps + r * p.grs;
#endif
#if BQ_FMX
  g.sb = (bq_u8 *)p.scales;
  g.r = r;
  g.ngroups = p.cols / p.group;
  g.grs = p.grs;
  g.g = g.enc = 1.0f;
#if BQ_MX_NV
  if (p.tensor_scale) { // given: Transformer Engine's encode factor is then 1 / g
    g.g = *(const float *)p.tensor_scale;
    if (BQ_MX_RULE == 7) g.enc = __fdiv_rn(1.0f, g.g);
  } else { // computed from bq_fused_amax's amax, and written once
    g.g = bq_mx_tensor_scale(*(const float *)p.amax, g.enc);
    if (r == 0 && threadIdx.x == 0) *(float *)p.out_tensor_scale = g.g;
  }
#endif
#endif
  return g;
}
static __device__ __forceinline__ void bq_fused_group_out(const bq_gshape &g, int a, const bq_qp &q) {
  g.scales[a >> g.gsh] = q.stored;
#if BQ_ASYM
  g.zps[a >> g.gsh] = q.zp;
#endif
}
#endif

#if BQ_GRAN == BQ_GRAN_TOKEN
// Per token: the block's reduction, then the row's scale (written by thread 0). 256-thread
// blocks have thread 0 alone compute it and read it from q_smem (as bq_rstd).
template <int TPR>
static __device__ __forceinline__ bq_qp bq_row_params(const bq_fused_params &p, bq_i64 r, bq_red red, bq_red *red_smem,
                                                      bq_qp *q_smem) {
  red = bq_red_team<true>(red, TPR, red_smem);
  if (TPR < BQ_THREADS) {
    const bq_qp q = bq_params_of(bq_red_round(red));
    if (threadIdx.x == 0) bq_fused_params_out(p, r, q);
    return q;
  }
  if (threadIdx.x == 0) {
    const bq_qp q = bq_params_of(bq_red_round(red));
    bq_fused_params_out(p, r, q);
    *q_smem = q;
  }
  __syncthreads(); // (thread 0 rewrites q_smem after the next row's reduction's barriers)
  return *q_smem;
}
#endif

#if BQ_GRAN == BQ_GRAN_GROUP
// Groups of any other size: a thread a group, its values recomputed from memory (h from
// the residual buffer or x; the gate and up from x).
static __device__ __forceinline__ void bq_groups_generic(const bq_fused_params &p, bq_i64 r, bq_i *y, bq_c rstd) {
  __syncthreads(); // the block's residual writes (h) are visible to every thread
  const int G = (int)p.group, ng = (int)p.cols / G;
  for (int g = threadIdx.x; g < ng; g += blockDim.x) {
    bq_red red = bq_red_init();
    for (int e = g * G; e < g * G + G; e++) bq_red_add(red, bq_to_c(bq_value_at(p, r, e, rstd)));
    const bq_qp q = bq_params_of(red);
    bq_fused_params_out(p, r * p.grs + g, q);
    for (int e = g * G; e < g * G + G; e++) y[e] = (bq_i)bq_quantize_int(bq_to_c(bq_value_at(p, r, e, rstd)), q.s, q.z);
  }
}
#endif

#if BQ_FMX
// ---- microscaling: a group's scale byte from its amax by the plan's rule, its elements
// converted (common.cuh), codes two a byte for E2M1 (the lower index in the low nibble)
static __device__ __forceinline__ bq_mx_scale bq_fmx_scale(const bq_gshape &gs, bq_i64 g, bq_c amax, bool store) {
  const int code = bq_mx_rule(amax, gs.g, gs.enc);
  if (store) gs.sb[bq_mx_sidx(gs.r, g, gs.ngroups, gs.grs)] = (bq_u8)code;
  return bq_mx_scale_of(code, gs.g);
}
// One access on the fast path (whole accesses: G, hence D, a multiple of V): g, its group's
// reduction (merged over the group's lanes and rounded); its first lane stores the scale. yw:
// the width y's row start allows (an access's codes keep it: BQ_MX_YB(V) bytes, a power of two).
static __device__ __forceinline__ void bq_fmx_access(const bq_gshape &gs, bq_red g, const bq_xchunk &v, bq_i *y, int a,
                                                     int yw) {
  constexpr int NB = BQ_MX_YB(BQ_VEC);
  bq_chunk<bq_u8, NB> o;
#if (BQ_MX_NV_PAIRS || BQ_MX_HALF_PAIRS) && BQ_FMX_PAIRS
  { // E2M1 from bf16 or f16 two elements a step where the group's scale allows (as mx.cu)
    const int code = bq_mx_rule(g.a, gs.g, gs.enc);
    if (gs.sub == 0) gs.sb[bq_mx_sidx(gs.r, a >> gs.gsh, gs.ngroups, gs.grs)] = (bq_u8)code;
#if BQ_MX_NV_PAIRS
    const float sc = __fmul_rn(gs.g, bq_e4m3_f32(code));
    const bool pairs = BQ_VEC % 8 == 0 && sc > 0.0f && bq_scale_is_plain(sc);
    if (pairs) bq_nv_pairs<BQ_VEC>(v, sc, o);
#else
    const float rcp = bq_ue8m0_f32(code == 255 ? 255 : 254 - code);
    const bool pairs = BQ_VEC % 8 == 0 && !(rcp < BQ_H2_MIN) && !(rcp > BQ_H2_MAX); // (a normal half, or NaN)
    if (pairs) bq_e2m1_pairs<BQ_VEC>(v, rcp, o);
#endif
    if (pairs) {
      bq_store((bq_u8 *)y + BQ_MX_YB(a * BQ_VEC), o, yw);
      return;
    }
  }
  const bq_mx_scale s = bq_fmx_scale(gs, a >> gs.gsh, g.a, false);
#else
  const bq_mx_scale s = bq_fmx_scale(gs, a >> gs.gsh, g.a, gs.sub == 0);
#endif
  bq_c c[BQ_VEC];
  bq_chunk_c(v, c);
#if BQ_MX_NV_FAST
  int qv[BQ_VEC];
  bq_mx_quantize_n<BQ_VEC>(c, s, qv); // (the quotient's form chosen once for the access)
#endif
#pragma unroll
  for (int j = 0; j < BQ_VEC; j++) {
#if BQ_MX_NV_FAST
    const int q = qv[j];
#else
    const int q = bq_mx_quantize(c[j], s);
#endif
#if BQ_IT == BQ_TYPE_E2M1
    o.e[j >> 1] = (bq_u8)((j & 1) ? (o.e[j >> 1] | (q << 4)) : q);
#else
    o.e[j] = (bq_u8)q;
#endif
  }
  bq_store((bq_u8 *)y + BQ_MX_YB(a * BQ_VEC), o, yw); // (the fast path's groups are whole accesses)
}
// Groups of any other size: a thread a group, its values recomputed from memory (as
// bq_groups_generic)
static __device__ __forceinline__ void bq_fmx_generic(const bq_fused_params &p, const bq_gshape &gs, bq_i64 r, bq_i *y,
                                                      bq_c rstd) {
  __syncthreads(); // the block's residual writes (h) are visible to every thread
  const int G = (int)p.group, ng = (int)gs.ngroups;
  for (int g = threadIdx.x; g < ng; g += blockDim.x) {
    bq_red red = bq_red_init();
    for (int e = g * G; e < g * G + G; e++) bq_red_add(red, bq_to_c(bq_value_at(p, r, e, rstd)));
    const bq_mx_scale s = bq_fmx_scale(gs, g, red.a, true);
#if BQ_IT == BQ_TYPE_E2M1
    for (int e = g * G; e < g * G + G; e += 2)
      y[e >> 1] = (bq_i)(bq_mx_quantize(bq_to_c(bq_value_at(p, r, e, rstd)), s) |
                         (bq_mx_quantize(bq_to_c(bq_value_at(p, r, e + 1, rstd)), s) << 4));
#else
    for (int e = g * G; e < g * G + G; e++) y[e] = (bq_i)bq_mx_quantize(bq_to_c(bq_value_at(p, r, e, rstd)), s);
#endif
  }
}
// The blocked layout's padding, written 0 by the block of row r (tpr threads): the row's
// entries past its last group (groups padded to 4), and the padding rows rows + r,
// rows + r + rows, ... below rows rounded up to 128
static __device__ __forceinline__ void bq_fmx_pad(const bq_fused_params &p, bq_i64 r, int tpr) {
#if BQ_MX_LAYOUT == 2
  const bq_i64 ng = p.cols / p.group, pg = (ng + 3) & ~(bq_i64)3, prows = (p.rows + 127) & ~(bq_i64)127;
  bq_u8 *sb = (bq_u8 *)p.scales;
  for (bq_i64 g = ng + threadIdx.x; g < pg; g += tpr) sb[bq_mx_sidx(r, g, ng, 0)] = 0;
  for (bq_i64 pr = p.rows + r; pr < prows; pr += p.rows)
    for (bq_i64 g = threadIdx.x; g < pg; g += tpr) sb[bq_mx_sidx(pr, g, ng, 0)] = 0;
#else
  (void)p, (void)r, (void)tpr;
#endif
}
#endif

// ---- a row -------------------------------------------------------------------------------
// A block of TPR threads, CPT accesses a thread a batch; HOLD: the row is one batch, kept in
// registers throughout.
static __device__ __forceinline__ void bq_fquantize(const bq_xchunk &v, bq_qchunk &o, const bq_qp &q) {
  bq_c c[BQ_VEC];
#if BQ_LEAN
  // FP8: a scale from the row's or group's own amax takes the lean quotient, two codes a
  // cvt; any other (tiny, capped or not finite) the general form, which is right for all
  if (q.lean) {
    bq_chunk_c(v, c);
#pragma unroll
    for (int j = 0; j < BQ_VEC; j += 2) {
      const bq_u32 w = bq_f8x2_of_f32(bq_f8_lean_quotient(c[j], q.s), bq_f8_lean_quotient(c[j + 1], q.s));
      o.e[j] = (bq_i)(w & 0xFF);
      o.e[j + 1] = (bq_i)(w >> 8);
    }
    return;
  }
  bq_qp g = q;
  g.bounded = false;
  bq_chunk_c(v, c);
  bq_quantize_vals(c, o, g);
#else
  bq_chunk_c(v, c);
  bq_quantize_vals(c, o, q);
#endif
}
#if BQ_GRAN == BQ_GRAN_TOKEN
// The narrow entries' last pass: the row's held values quantized, the scale's form (q.bounded;
// FP8: q.lean, else the general form) fixed for the whole row so that the accesses'
// arithmetic interleaves without a branch
template <int TPR, int CPT, bool FULL, int BOUNDED>
static __device__ __forceinline__ void bq_fused_qrow(const bq_xchunk (&v)[CPT], bq_qp q, bq_i *y, int nacc, int D,
                                                     int yw) {
  q.bounded = BOUNDED != 0;
#if BQ_LEAN
  q.lean = BOUNDED != 0; // FP8: the caller takes BOUNDED for lean rows only
#endif
#pragma unroll
  for (int i = 0; i < CPT; i++) {
    const int a = threadIdx.x + i * TPR;
    bq_qchunk o;
    bq_fquantize(v[i], o, q);
    if (FULL || a < nacc) bq_qstore<true>(y, o, a, D, yw);
  }
}
#endif
#if BQ_GRAN == BQ_GRAN_GROUP
// The narrow entries' groups (p.fast_groups), up to four accesses at a time: their groups
// reduced together, each group's scale found by one lane and handed to the others, then
// the quantize, with the scale's form picked once for the accesses
template <int TPR, int CPT, bool FULL>
static __device__ __forceinline__ void bq_fused_groups(bq_red (&gr)[CPT], const bq_xchunk (&v)[CPT], const bq_gshape &gs,
                                                       bq_i *y, int b, int nacc, int D, int yw) {
  constexpr int N = CPT < 4 ? CPT : 4; // accesses at a time (more spill)
#pragma unroll
  for (int c0 = 0; c0 < CPT; c0 += N) {
    bq_red g[N];
#pragma unroll
    for (int i = 0; i < N; i++) g[i] = gr[c0 + i];
    bq_red_lanes_n<N>(g, gs.gc);
#if !BQ_FP8 && BQ_FT != BQ_TYPE_F64
    // Each group's scale found once, not by each of its lanes: the warp's N * 32 / gc groups
    // (at most 32 where gc >= N) go a lane each. Lane L takes the group k = L % ng of access
    // c0 + L / ng (ng = 32 / gc groups an access in the warp), whose lanes start at k gc; then,
    // where every one of them is bounded (uniform across the warp), each lane takes back its
    // groups' quotient parameters, which are all the bounded quantize reads (the reciprocal,
    // the scaled scale and the zero point). Otherwise every lane computes its own, below.
    if (gs.gc >= N) {
      const int L = threadIdx.x & 31, ng = 32 >> gs.gsh, pi = L >> (5 - gs.gsh), pk = L & (ng - 1);
      bq_red m = bq_red_init();
#pragma unroll
      for (int i = 0; i < N; i++) {
        const bq_red x = bq_red_shfl<false>(g[i], pk << gs.gsh);
        if (pi == i) m = x;
      }
      const bq_qp qm = bq_params_of(bq_red_round(m));
      const int a0 = b + (threadIdx.x & ~31) + (pk << gs.gsh) + (c0 + pi) * TPR; // the group's first access
      if (pi < N && (FULL || a0 < nacc)) bq_fused_group_out(gs, a0, qm);
      if (__all_sync(0xffffffffu, qm.bounded || pi >= N)) {
#pragma unroll
        for (int i = 0; i < N; i++) {
          const int src = i * ng + (L >> gs.gsh), a = b + threadIdx.x + (c0 + i) * TPR;
          bq_qp qb = qm;
          qb.s.rcp = __shfl_sync(0xffffffffu, qm.s.rcp, src);
          qb.s.ss = __shfl_sync(0xffffffffu, qm.s.ss, src);
#if BQ_ASYM
          qb.zp = __shfl_sync(0xffffffffu, qm.zp, src);
#endif
          qb.bounded = true;
          bq_qchunk o;
          bq_fquantize(v[c0 + i], o, qb);
          if (FULL || a < nacc) bq_qstore<true>(y, o, a, D, yw);
        }
        continue;
      }
    }
#endif
    bq_qp q[N];
    bool all = true;
#pragma unroll
    for (int i = 0; i < N; i++) {
      q[i] = bq_params_of(bq_red_round(g[i]));
      all = all && (BQ_LEAN ? bq_is_lean(q[i]) : q[i].bounded); // FP8: the lean form or the general
      const int a = b + threadIdx.x + (c0 + i) * TPR;
      if ((FULL || a < nacc) && gs.sub == 0) bq_fused_group_out(gs, a, q[i]); // (again, where stored above: the same)
    }
#pragma unroll
    for (int i = 0; i < N; i++) {
      const int a = b + threadIdx.x + (c0 + i) * TPR;
      bq_qchunk o;
      bq_qp qb = q[i];
      if (all) {
        qb.bounded = true;
#if BQ_LEAN
        qb.lean = true;
#endif
        bq_fquantize(v[c0 + i], o, qb);
      } else {
#if BQ_LEAN
        qb.lean = false;
#endif
        bq_fquantize(v[c0 + i], o, qb);
      }
      if (FULL || a < nacc) bq_qstore<true>(y, o, a, D, yw);
    }
  }
}
#endif
// DENSE: every stream's rows 16-byte aligned and D a multiple of V (the host's promise): no
// element path. FULL: the row is exactly TPR CPT accesses (the host's promise too): no
// access is checked against its end. RES: the code for a residual (RMSNorm), else none.
template <int TPR, int CPT, bool HOLD, bool DENSE, bool FULL, bool RES>
static __device__ __forceinline__ void bq_fused_row(const bq_fused_params &p, bq_i64 r, bq_c *ss_smem, bq_red *red_smem,
                                                    bq_qp *q_smem) {
  constexpr int R = BQ_THREADS / TPR; // the contract's lanes a thread holds
  static_assert(BQ_THREADS % TPR == 0 && TPR % 32 == 0 && CPT % R == 0, "lanes");
  // NARROW: the row held, dense, and y's rows aligned to a chunk of codes (the host's
  // promise): the narrow entries and bq_fused_c2d, whose code has fewer branches an access:
  // y's stores take one width, n's optional stores follow the pass that computes it, and per
  // token the last pass picks the scale's form once for the row. (bq_fused_c8d keeps the
  // general form: with it, it spills.)
  constexpr bool NARROW = HOLD && DENSE && (TPR < BQ_THREADS || CPT <= 2);
  constexpr bool XCS = TPR < BQ_THREADS && CPT == 8 && FULL; // bq_fused_m8f streams x (bq_fload)
  const int t = threadIdx.x;
  const int D = (int)p.cols, nacc = (D + BQ_VEC - 1) / BQ_VEC, batch = TPR * CPT;
  const int nb = HOLD ? batch : nacc; // the batch loops' end
  bq_xchunk v[CPT];
  bq_c rstd = 0;
#if BQ_RMS
  // the shortest rows load the weight with the row, so that normalizing waits on no further
  // load (longer ones keep the registers, which buy more blocks an SM)
  constexpr bool WPRE = HOLD && CPT == 1;
  constexpr bool RBATCH = CPT <= 2 || (TPR < BQ_THREADS && CPT <= 4); // the residual's loads: bq_rms_res, else bq_rms_res1
  bq_xchunk wv[WPRE ? CPT : 1];
  bq_c ss[R]; // lane t + j TPR's sum of squares, its accesses in ascending order
#pragma unroll
  for (int j = 0; j < R; j++) ss[j] = 0;
  for (int b = 0; b < nb; b += batch) { // (batch is a multiple of 256: access i is in lane t + (i % R) TPR)
#pragma unroll
    for (int i = 0; i < CPT; i++) {
      const int a = b + t + i * TPR;
      if (FULL || a < nacc) {
        bq_fload<false, DENSE, XCS>(v[i], (const bq_t *)p.x + r * p.xs, a, p.cols, p.aligned);
        if (RES && !RBATCH && p.res) bq_rms_res1<DENSE>(p, r, a, v[i]);
        if (WPRE) bq_fload<true>(wv[WPRE ? i : 0], (const bq_t *)p.w, a, p.cols, p.aligned);
      }
    }
    if (RES && RBATCH && p.res) bq_rms_res<TPR, CPT, DENSE, FULL>(p, r, b, nacc, v);
#pragma unroll
    for (int i = 0; i < CPT; i++)
      if (FULL || b + t + i * TPR < nacc) bq_add_squares(ss[i % R], v[i]);
  }
  rstd = bq_rstd<TPR>(p, ss, ss_smem);
#endif
  bq_i *y = (bq_i *)p.y + BQ_FYB(r * p.ys);
  const int yw = BQ_FMX ? bq_width(y) : NARROW ? (int)sizeof(bq_qchunk) : bq_qwidth(y);
#if BQ_GRAN == BQ_GRAN_TENSOR
  const bq_scale s = bq_scale_of((bq_c)p.scale);
  const bq_zp z = bq_zp_of(p.zp);
#elif BQ_GRAN == BQ_GRAN_TOKEN
  bq_red red = bq_red_init();
#else
  const bq_gshape gs = bq_gshape_of(p, r);
#endif
  for (int b = 0; b < nb; b += batch) {
#if BQ_GRAN != BQ_GRAN_TOKEN
    bq_red gr[CPT]; // per group: each access's own reduction (per tensor: unused)
#endif
#pragma unroll
    for (int i = 0; i < CPT; i++) {
      const int a = b + t + i * TPR;
      const bool in = FULL || a < nacc;
#if BQ_GRAN == BQ_GRAN_TOKEN
      bq_red &rd = red; // the row's reduction
#else
      gr[i] = bq_red_init();
      bq_red &rd = gr[i];
#endif
      if (in) {
#if BQ_RMS
        if (WPRE) bq_rms_nw(v[i], wv[WPRE ? i : 0], rstd, rd);
        else if (HOLD) bq_rms_n<DENSE>(p, a, v[i], rstd, rd);
        else bq_value(p, r, a, rstd, v[i], rd);
#else
        bq_value<DENSE>(p, r, a, rstd, v[i], rd);
#endif
        if (!NARROW && p.out) bq_fstore<DENSE>((bq_t *)p.out + r * p.os, v[i], a, D, p.aligned);
#if BQ_GRAN == BQ_GRAN_TENSOR
        bq_qchunk o;
        bq_quantize_static(v[i], o, s, z);
        bq_qstore<DENSE>(y, o, a, D, yw);
#endif
      }
    }
    if (NARROW && p.out) // n, once every access has it (one branch a row, not one an access)
#pragma unroll
      for (int i = 0; i < CPT; i++)
        if (FULL || b + t + i * TPR < nacc) bq_fstore<DENSE>((bq_t *)p.out + r * p.os, v[i], b + t + i * TPR, D, p.aligned);
#if BQ_GRAN == BQ_GRAN_GROUP
#if !BQ_FMX
    if (NARROW && p.fast_groups) bq_fused_groups<TPR, CPT, FULL>(gr, v, gs, y, b, nacc, D, yw);
    else
#endif
    if (p.fast_groups) { // a group: gc consecutive lanes, one access each (all lanes shuffle)
#pragma unroll
      for (int i = 0; i < CPT; i++) {
        const int a = b + t + i * TPR;
        const bq_red g = bq_red_round(bq_red_lanes(gr[i], gs.gc));
        if (FULL || a < nacc) {
#if BQ_FMX
          bq_fmx_access(gs, g, v[i], y, a, yw);
#else
          const bq_qp q = bq_params_of(g);
          if (gs.sub == 0) bq_fused_group_out(gs, a, q);
          bq_qchunk o;
          bq_fquantize(v[i], o, q);
          bq_qstore<DENSE>(y, o, a, D, yw);
#endif
        }
      }
    }
#endif
  }
#if BQ_GRAN == BQ_GRAN_TOKEN
  const bq_qp q = bq_row_params<TPR>(p, r, red, red_smem, q_smem);
  if (NARROW) { // the scale's form picked once for the row
    if (BQ_LEAN ? bq_is_lean(q) : q.bounded) bq_fused_qrow<TPR, CPT, FULL, 1>(v, q, y, nacc, D, yw);
    else bq_fused_qrow<TPR, CPT, FULL, 0>(v, q, y, nacc, D, yw);
    return;
  }
  for (int b = 0; b < nb; b += batch) {
#pragma unroll
    for (int i = 0; i < CPT; i++) {
      const int a = b + t + i * TPR;
      if (FULL || a < nacc) {
        bq_red unused = bq_red_init();
        if (!HOLD) bq_value(p, r, a, rstd, v[i], unused);
        bq_qchunk o;
        bq_fquantize(v[i], o, q);
        bq_qstore<DENSE>(y, o, a, D, yw);
      }
    }
  }
#elif BQ_GRAN == BQ_GRAN_GROUP
#if BQ_FMX
  if (!p.fast_groups) bq_fmx_generic(p, gs, r, y, rstd);
  bq_fmx_pad(p, r, TPR);
#else
  if (!p.fast_groups) bq_groups_generic(p, r, y, rstd);
#endif
#endif
}

// ---- bq_fused_staged: rows staged in shared memory, the next one copied in while this one runs
// A persistent block takes rows blockIdx.x, + gridDim.x, ...; two slots of shared memory
// hold a row each (its streams: RMSNorm x, then the residual; gated: gate, then up, as
// 16-byte accesses). While a row is worked on, cp.async brings the block's next row into
// the other slot, so loads are always in flight, and no
// register holds a row: any row that fits two slots is read from DRAM once. Thread t
// copies exactly the accesses it later reads, so its own cp.async.wait_group is all the
// synchronization a slot needs. Only rows whose streams start 16 bytes aligned come here.

static __device__ __forceinline__ void bq_stage(const bq_fused_params &p, bq_i64 r, bq_u32 slot, int nacc) {
  const bq_t *s0 = (const bq_t *)p.x + r * p.xs;
#if BQ_RMS
  const bq_t *s1 = p.res ? (const bq_t *)p.res + r * p.rs : (const bq_t *)0;
#else
  const bq_t *s1 = s0 + p.cols;
#endif
  for (int a = threadIdx.x; a < nacc; a += BQ_THREADS) {
    const int e0 = a * BQ_VEC, left = (int)p.cols - e0;
    const int bytes = (left < BQ_VEC ? left : BQ_VEC) * (int)sizeof(bq_t); // the rest reads as 0
    bq_cp_async16(slot + (bq_u32)a * 16u, s0 + e0, bytes);
    if (s1) bq_cp_async16(slot + (bq_u32)(nacc + a) * 16u, s1 + e0, bytes);
  }
}

// One staged row: S[0, nacc) is x (RMSNorm; h after the first pass) or the gate (a after
// the second), S[nacc, 2 nacc) the residual or up; W the weight (RMSNorm), staged once.
static __device__ __forceinline__ void bq_staged_row(const bq_fused_params &p, bq_i64 r, bq_xchunk *S, const bq_xchunk *W,
                                                     int nacc, bq_c *ss_smem, bq_red *red_smem, bq_qp *q_smem) {
  const int t = threadIdx.x, D = (int)p.cols;
  bq_c rstd = 0;
#if BQ_RMS
  bq_c ss[1] = {0};
  bq_t *const rr = p.res ? (bq_t *)p.res + r * p.rs : (bq_t *)0;
  for (int a = t; a < nacc; a += BQ_THREADS) {
    bq_xchunk h = S[a];
    if (rr) {
      bq_add_chunk(h, S[nacc + a]);
      bq_fstore(rr, h, a, D, true);
      S[a] = h;
    }
    bq_add_squares(ss[0], h);
  }
  rstd = bq_rstd<BQ_THREADS>(p, ss, ss_smem);
#endif
  bq_i *y = (bq_i *)p.y + BQ_FYB(r * p.ys);
  bq_t *const out = p.out ? (bq_t *)p.out + r * p.os : (bq_t *)0;
  const int yw = BQ_FMX ? bq_width(y) : bq_qwidth(y);
#if BQ_GRAN == BQ_GRAN_TENSOR
  const bq_scale s = bq_scale_of((bq_c)p.scale);
  const bq_zp z = bq_zp_of(p.zp);
#elif BQ_GRAN == BQ_GRAN_TOKEN
  bq_red red = bq_red_init();
#else
  const bq_gshape gs = bq_gshape_of(p, r);
#endif
  for (int b = 0; b < nacc; b += BQ_THREADS) { // uniform trip count: the group path shuffles
    const int a = b + t;
    bq_xchunk v;
#if BQ_GRAN == BQ_GRAN_TOKEN
    bq_red &rd = red; // the row's reduction
#else
    bq_red gr = bq_red_init(); // per group: this access's (per tensor: unused)
    bq_red &rd = gr;
#endif
    if (a < nacc) {
      v = S[a];
#if BQ_RMS
      bq_xchunk wv;
      if (p.wstage) wv = W[a];
      else bq_fload<true>(wv, (const bq_t *)p.w, a, D, true);
      bq_rms_nw(v, wv, rstd, rd);
#else
      bq_gate(v, S[nacc + a], rd);
#endif
#if BQ_GRAN == BQ_GRAN_TOKEN
      S[a] = v; // quantized after the row's reduction
#endif
      if (out) bq_fstore(out, v, a, D, true);
#if BQ_GRAN == BQ_GRAN_TENSOR
      bq_qchunk o;
      bq_quantize_static(v, o, s, z);
      bq_qstore(y, o, a, D, yw);
#endif
    }
#if BQ_GRAN == BQ_GRAN_GROUP
    if (p.fast_groups) {
      const bq_red g = bq_red_round(bq_red_lanes(gr, gs.gc));
      if (a < nacc) {
#if BQ_FMX
        bq_fmx_access(gs, g, v, y, a, yw);
#else
        const bq_qp q = bq_params_of(g);
        if (gs.sub == 0) bq_fused_group_out(gs, a, q);
        bq_qchunk o;
        bq_fquantize(v, o, q);
        bq_qstore(y, o, a, D, yw);
#endif
      }
    }
#endif
  }
#if BQ_GRAN == BQ_GRAN_TOKEN
  const bq_qp q = bq_row_params<BQ_THREADS>(p, r, red, red_smem, q_smem);
  for (int a = t; a < nacc; a += BQ_THREADS) {
    const bq_xchunk v = S[a];
    bq_qchunk o;
    bq_fquantize(v, o, q);
    bq_qstore(y, o, a, D, yw);
  }
#elif BQ_GRAN == BQ_GRAN_GROUP
#if BQ_FMX
  if (!p.fast_groups) bq_fmx_generic(p, gs, r, y, rstd);
  bq_fmx_pad(p, r, BQ_THREADS);
#else
  if (!p.fast_groups) bq_groups_generic(p, r, y, rstd);
#endif
#endif
}

#if BQ_E_FUSED_STAGED
extern "C" __global__ void __launch_bounds__(BQ_THREADS) BQ_FN_FUSED_STAGED(const bq_fused_params p) {
  BQ_DYNAMIC_SMEM(smem);
  __shared__ bq_c ss_smem[BQ_THREADS / 32 + 1];
  __shared__ bq_red red_smem[BQ_THREADS / 32];
  __shared__ bq_qp q_smem;
  const int nacc = ((int)p.cols + BQ_VEC - 1) / BQ_VEC;
  // the weight (RMSNorm), then rows r, r + g, r + 2 g, ... in slots 0, 1, 0, ...
  const int wbytes = BQ_RMS && p.wstage ? nacc * 16 : 0;
  const bq_u32 wbase = bq_smem_addr(smem + BQ_ACT_BYTES), base = wbase + (bq_u32)wbytes;
#if BQ_ACT_TAB
  bq_act_fill();
#endif
#if BQ_RMS
  for (int a = threadIdx.x; a < nacc && p.wstage; a += BQ_THREADS) {
    const int e0 = a * BQ_VEC, left = (int)p.cols - e0;
    bq_cp_async16(wbase + (bq_u32)a * 16u, (const bq_t *)p.w + e0, (left < BQ_VEC ? left : BQ_VEC) * (int)sizeof(bq_t));
  }
#endif
  const bq_i64 g = gridDim.x;
  if (blockIdx.x < p.rows) bq_stage(p, blockIdx.x, base, nacc);
  bq_cp_commit();
  int s = 0;
  for (bq_i64 r = blockIdx.x; r < p.rows; r += g, s ^= 1) {
    if (r + g < p.rows) bq_stage(p, r + g, base + (bq_u32)((s ^ 1) * p.slot), nacc); // the slot the last row used
    bq_cp_commit();
    bq_cp_wait<1>(); // this row's copies have landed; the next row's may be in flight
    bq_staged_row(p, r, (bq_xchunk *)(smem + BQ_ACT_BYTES + wbytes + s * p.slot), (const bq_xchunk *)(smem + BQ_ACT_BYTES),
                  nacc, ss_smem, red_smem, &q_smem);
  }
}
#endif

#if BQ_ACT_TAB
#define BQ_ACT_FILL() bq_act_fill()
#else
#define BQ_ACT_FILL() (void)0
#endif
// MINB: blocks an SM the registers must allow (0: the compiler's choice); DENSE, FULL, RES: as
// for bq_fused_row
#define BQ_FUSED_ENTRY(name, TPR, CPT, HOLD, MINB, DENSE, FULL, RES)                               \
  extern "C" __global__ void __launch_bounds__(TPR, MINB) name(const bq_fused_params p) {    \
    __shared__ bq_c ss_smem[BQ_THREADS / 32 + 1];                                            \
    __shared__ bq_red red_smem[BQ_THREADS / 32];                                             \
    __shared__ bq_qp q_smem;                                                                 \
    BQ_ACT_FILL();                                                                           \
    for (bq_i64 r = blockIdx.x; r < p.rows; r += gridDim.x)                                  \
      bq_fused_row<TPR, CPT, HOLD, DENSE, FULL, RES>(p, r, ss_smem, red_smem, &q_smem);      \
  }
// bq_fused_c2 (rows of 257 to 512 accesses, bf16 D = 4096) is held to more blocks an SM
// than the compiler's 64 registers allow, where that spills nothing: more warps hide its
// latency (H100, bf16 [8192, 4096]: RMSNorm per group 60.0 us at 4 blocks, 53.5 at 6).
// RMSNorm takes 5 blocks (48 registers: at 40 the residual's batched loads and the
// asymmetric reductions spill); the gated op with the activation's table 5 (at 6 it spills
// and ran slower); the gated op that computes the formula keeps the compiler's choice (at
// 48 registers it spills)
#define BQ_C2_MINB (BQ_RMS || BQ_ACT_TAB ? 5 : 0)
// bq_fused_c8 with the activation's table (gated rows of 1025 to 2048 accesses, which it
// takes in place of the staged kernel) is held to 4 blocks an SM (64 registers): it spills
// a few words, and ran faster (bf16 [8192, 14336]: 251 us at 3 blocks, 237 at 4); so is
// RMSNorm per token, which the host gives such rows with a residual (it too ran faster at 4).
// Per group the host gives them such rows too, at the compiler's choice of registers.
#define BQ_C8_MINB (BQ_ACT_TAB || (BQ_RMS && BQ_GRAN == BQ_GRAN_TOKEN) ? 4 : 0)
// (threads, accesses a thread): the host's bq__fused_shapes, by entry
#if BQ_E_FUSED_C1
BQ_FUSED_ENTRY(BQ_FN_FUSED_C1, 256, 1, true, 0, false, false, true)
#endif
#if BQ_E_FUSED_C2
BQ_FUSED_ENTRY(BQ_FN_FUSED_C2, 256, 2, true, BQ_C2_MINB, false, false, true)
#endif
#if BQ_E_FUSED_C4
BQ_FUSED_ENTRY(BQ_FN_FUSED_C4, 256, 4, true, 0, false, false, true)
#endif
#if BQ_E_FUSED_C8
BQ_FUSED_ENTRY(BQ_FN_FUSED_C8, 256, 8, true, BQ_C8_MINB, false, false, true)
#endif
#if BQ_E_FUSED_LONG
BQ_FUSED_ENTRY(BQ_FN_FUSED_LONG, 256, BQ_LONG_CPT, false, 0, false, false, true)
#endif
// the narrow entries: 128 threads a row, dense rows with y's rows aligned to a chunk of codes,
// at most 80 registers (6 blocks an SM; bq_fused_m4f 64, 8 blocks: its loads all hoisted, it
// asked for 71; bq_fused_m16 128, 4 blocks: its row's 64 registers); the f entries for rows
// of exactly 512 or 1024 accesses. bq_fused_m4 and bq_fused_m4f take a residual too (the
// wider ones spilled or ran slower with it)
#if BQ_E_FUSED_M4
BQ_FUSED_ENTRY(BQ_FN_FUSED_M4, 128, 4, true, 6, true, false, true)
#endif
#if BQ_E_FUSED_M8
BQ_FUSED_ENTRY(BQ_FN_FUSED_M8, 128, 8, true, 6, true, false, false)
#endif
#if BQ_E_FUSED_M4F
BQ_FUSED_ENTRY(BQ_FN_FUSED_M4F, 128, 4, true, 8, true, true, true)
#endif
#if BQ_E_FUSED_M8F
BQ_FUSED_ENTRY(BQ_FN_FUSED_M8F, 128, 8, true, 6, true, true, false)
#endif
#if BQ_E_FUSED_M16
BQ_FUSED_ENTRY(BQ_FN_FUSED_M16, 128, 16, true, 4, true, false, false)
#endif
// bq_fused_c2 and bq_fused_c8 for dense rows, a residual allowed: no element path, which
// costs the wide entries registers (bq_fused_c8 spills with it, not without) and
// instruction fetch
#if BQ_E_FUSED_C2D
BQ_FUSED_ENTRY(BQ_FN_FUSED_C2D, 256, 2, true, BQ_C2_MINB, true, false, true)
#endif
#if BQ_E_FUSED_C8D
BQ_FUSED_ENTRY(BQ_FN_FUSED_C8D, 256, 8, true, BQ_C8_MINB, true, false, true)
#endif

#if BQ_E_FUSED_AMAX
// NVFP4 with the tensor scale computed, its first launches: the producer's amax over the
// tensor, nothing else written (the residual's h computed, not stored). A block takes rows
// blockIdx.x, + gridDim.x, ... and writes its amax to the workspace (f32; >= +0, never NaN);
// then one block (p.nparts > 0) reduces the partials into amax[nparts]. Thread t is the
// contract's lane t of RMSNorm's sum of squares; each row is read twice (the second from L2).
#if BQ_RMS
// h = T(x + residual) of access a, or x
static __device__ __forceinline__ void bq_fmx_h(const bq_fused_params &p, bq_i64 r, int a, bq_xchunk &h) {
  bq_fload<false>(h, (const bq_t *)p.x + r * p.xs, a, p.cols, p.aligned);
  if (p.res) {
    bq_xchunk v;
    bq_fload<false>(v, (const bq_t *)p.res + r * p.rs, a, p.cols, p.aligned);
    bq_add_chunk(h, v);
  }
}
#endif
extern "C" __global__ void __launch_bounds__(BQ_THREADS) BQ_FN_FUSED_AMAX(const bq_fused_params p) {
#if BQ_RMS
  __shared__ bq_c ss_smem[BQ_THREADS / 32 + 1];
#endif
  __shared__ bq_red red_smem[BQ_THREADS / 32];
  float *ws = (float *)p.amax;
  const int t = threadIdx.x, nacc = ((int)p.cols + BQ_VEC - 1) / BQ_VEC;
  bq_red red = bq_red_init();
  if (p.nparts) {
    for (int i = t; i < p.nparts; i += BQ_THREADS) red.a = bq_max(red.a, (bq_c)ws[i]);
  } else {
    BQ_ACT_FILL();
    for (bq_i64 r = blockIdx.x; r < p.rows; r += gridDim.x) {
#if BQ_RMS
      bq_c ss[1] = {0};
      for (int a = t; a < nacc; a += BQ_THREADS) {
        bq_xchunk h;
        bq_fmx_h(p, r, a, h);
        bq_add_squares(ss[0], h);
      }
      const bq_c rstd = bq_rstd<BQ_THREADS>(p, ss, ss_smem);
      for (int a = t; a < nacc; a += BQ_THREADS) {
        bq_xchunk h;
        bq_fmx_h(p, r, a, h);
        bq_rms_n<false>(p, a, h, rstd, red);
      }
#else
      for (int a = t; a < nacc; a += BQ_THREADS) {
        bq_xchunk v;
        bq_value(p, r, a, 0, v, red);
      }
#endif
    }
    red = bq_red_round(red); // (the amax of the T values)
  }
  red = bq_red_team<false>(red, BQ_THREADS, red_smem);
  if (t == 0) ws[p.nparts ? p.nparts : blockIdx.x] = (float)red.a;
}
#endif
