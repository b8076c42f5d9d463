// linear.cu - W8A8 linear layers: an int8 tensor-core GEMM with a fused dequantizing
// epilogue, and the weight row sums that asymmetric activations need.
//
//   acc[m, n]  = sum_k a[m, k] * w[n, k]               exact int32 (mma.sync m16n8k32)
//   acc'[m, n] = acc[m, n] - azp[m] * wsum[n]           asymmetric activations only
//   y[m, n]    = Tout(C(acc') * C(sa[m]) * C(sw[n]) + C(bias[n]))
//
// a is [M, K] int8 (s8 or u8) with row stride lda; w is [N, K] s8, K contiguous (the
// layout of nn.Linear.weight); y is [M, N] with row stride ldy. Every float operation is
// an explicit round-to-nearest-even operation, so the result equals the CPU reference bit
// for bit. The int32 arithmetic of acc' wraps (unsigned), which is exact whenever the
// true value fits, as validation guarantees.
//
// FP8 linear layers (BQ_OP_FP8_LINEAR) take the same tiles with e4m3 weights, e4m3 or e5m2
// activations and f32 accumulators; their tensor cores' sums are the hardware's own, so the
// order in which they are formed is fixed instead (see bq_fp8_wgmma):
//
//   acc[m, n]  = +0, then for each 128-element block b of K in order acc = fma(P_b, s_b, acc):
//                P_b[m, n] the tensor cores' sum of block b from zero, s_b = 1 (tensorwise,
//                rowwise) or sa[m][b] * sw[n / 128][b] rounded to f32 (blockwise)
//   y[m, n]    = Tout(acc * sa * sw + bias)      sa, sw: f32, one each or per row / column
//                (blockwise: Tout(acc + bias))
//
// Prelude (besides common.cuh's BQ_FT = output type Tout, BQ_IT = activation int type):
//   BQ_OP      BQ_OP_LINEAR_WEIGHT_SUMS: bq_weight_sums; BQ_OP_FP8_LINEAR: the FP8 tiles
//              (bq_fp8_gemm, bq_fp8_wgmma); else (BQ_OP_SMOOTHQUANT_LINEAR) the GEMM entry
//              points, which both int8 linear layers share
//   BQ_WST     weight-scale (and per-token activation-scale) type: BQ_TYPE_F32, _F64, _F16, _BF16
//   BQ_ASF32   1: per-token activation scales are f32 whatever BQ_WST says (QuantizedLinear)
//   BQ_WGMMA   1: an sm_90a module, whose tiles are wgmma's (bq_gemm_wgmma; bq_gemm_large traps)
//   BQ_LB_*    each entry point's __launch_bounds__: BQ_LB_GEMM_LARGE, _GEMV, _GEMV32, _GEMV64
//              and _GEMM_WGMMA from the header's bq__linear_table, BQ_LB_WEIGHT_SUMS, or
//              BQ_LB_FP8_GEMM and BQ_LB_FP8_WGMMA

#include "linear_abi.h" // the entry points, parameter block and flags, which the host compiles too

// ---- scalars ---------------------------------------------------------------------------
template <int CODE> static __device__ __forceinline__ bq_c bq_any_to_c(bq_u64 base, bq_i64 i) {
  if (CODE == BQ_TYPE_F32) return (bq_c)((const float *)base)[i];
  if (CODE == BQ_TYPE_F64) return (bq_c)((const double *)base)[i]; // only when C is f64
  if (CODE == BQ_TYPE_F16) return (bq_c)bq_f16_to_f32(((const bq_u16 *)base)[i]);
  return (bq_c)bq_bf16_to_f32(((const bq_u16 *)base)[i]);
}

#if BQ_FT == BQ_TYPE_F64
static __device__ __forceinline__ bq_c bq_int_to_c(int v) { return __int2double_rn(v); }
#else
static __device__ __forceinline__ bq_c bq_int_to_c(int v) { return __int2float_rn(v); }
#endif

struct bq_row_q { bq_c sa; int zp; };
struct bq_col_q { bq_c sw, bias; int wsum; };

#if BQ_OP == BQ_OP_FP8_LINEAR
// f32 scales: one each (BQ_LF_SA_ROW / BQ_LF_SW_ROW clear: element 0) or one a row / column;
// blockwise scales multiply the K blocks' sums instead (bq_blk_scale), and the epilogue's are 1
// (as where K == 0: y is the bias, and no scale is read)
static __device__ __forceinline__ bq_row_q bq_row_of(const bq_linear_params &p, bq_i64 m) {
  if (p.flags & (BQ_LF_BLOCK | BQ_LF_K0)) return bq_row_q{(bq_c)1, 0};
  return bq_row_q{(bq_c)((const float *)p.a_scales)[(p.flags & BQ_LF_SA_ROW) ? m : 0], 0};
}
static __device__ __forceinline__ bq_col_q bq_col_of(const bq_linear_params &p, bq_i64 n) {
  bq_col_q c;
  c.sw = (p.flags & (BQ_LF_BLOCK | BQ_LF_K0)) ? (bq_c)1
                                              : (bq_c)((const float *)p.w_scales)[(p.flags & BQ_LF_SW_ROW) ? n : 0];
  c.bias = (p.flags & BQ_LF_BIAS) ? bq_to_c(((const bq_t *)p.bias)[n]) : (bq_c)0;
  c.wsum = 0;
  return c;
}
// The epilogue of one output: ((acc * sa) * sw) + bias, each step rounded in f32.
static __device__ __forceinline__ bq_t bq_epilogue(float acc, const bq_row_q &r, const bq_col_q &c, int flags) {
  if (flags & BQ_LF_K0) return bq_from_c((flags & BQ_LF_BIAS) ? c.bias : (bq_c)0);
  bq_c v = bq_mul(bq_mul(acc, r.sa), c.sw);
  if (flags & BQ_LF_BIAS) v = bq_add(v, c.bias);
  return bq_from_c(v);
}
// Blockwise: the activation scales' leading dimension, which w_sums carries (linear_abi.h)
static __device__ __forceinline__ bq_i64 bq_sa_ld(const bq_linear_params &p) { return (bq_i64)p.w_sums; }
// Blockwise: where the scales of row m's and of weight block nb's K block b lie
static __device__ __forceinline__ bq_i64 bq_sa_at(const bq_linear_params &p, bq_i64 m, int b) {
  return (p.flags & BQ_LF_SA_MN) ? b * bq_sa_ld(p) + m : m * bq_sa_ld(p) + b;
}
static __device__ __forceinline__ bq_i64 bq_sw_at(const bq_linear_params &p, bq_i64 nb, int b) {
  return nb * ((p.k + 127) >> 7) + b;
}
// Blockwise: the scales of K block b for rows m0 .. m0 + rows - 1 and weight block nb into
// shared memory at dst (rows floats, then the weight's), a 4-byte cp.async each (thread t <
// rows copies row m0 + t's, thread rows the weight's); rows past M are zero-filled.
static __device__ __forceinline__ void bq_blk_scale_copy(const bq_linear_params &p, bq_u32 dst, bq_i64 m0, bq_i64 nb,
                                                         int rows, int b, int tid) {
  if (tid < rows) {
    const bq_i64 m = m0 + tid;
    const float *src = (const float *)p.a_scales + (m >= p.m ? 0 : bq_sa_at(p, m, b));
    bq_cp_async4(dst + 4 * tid, src, m < p.m ? 4 : 0);
  } else if (tid == rows) {
    bq_cp_async4(dst + 4 * rows, (const float *)p.w_scales + bq_sw_at(p, nb, b), 4);
  }
}
// What K block b's partial sum P of row m, column block nb (128 weight rows) is multiplied
// by as it joins the accumulator, acc = fma(P, s, acc): blockwise sa[m][b] * sw[nb][b]
// (rounded to f32), else 1 (acc + P). Rows past M (never stored) read no scale.
static __device__ __forceinline__ float bq_blk_scale(const bq_linear_params &p, bq_i64 m, bq_i64 nb, int b) {
  if (!(p.flags & BQ_LF_BLOCK) || m >= p.m) return 1.0f;
  return __fmul_rn(((const float *)p.a_scales)[bq_sa_at(p, m, b)], ((const float *)p.w_scales)[bq_sw_at(p, nb, b)]);
}
#else
static __device__ __forceinline__ bq_row_q bq_row_of(const bq_linear_params &p, bq_i64 m) {
  bq_row_q r;
  if (p.flags & BQ_LF_SA_ROW) r.sa = BQ_ASF32 ? (bq_c)((const float *)p.a_scales)[m] : bq_any_to_c<BQ_WST>(p.a_scales, m);
  else r.sa = (bq_c)p.a_scale;
  r.zp = !(p.flags & BQ_LF_ZP) ? 0 : (p.flags & BQ_LF_ZP_ROW) ? ((const int *)p.a_zps)[m] : p.a_zp;
  return r;
}

static __device__ __forceinline__ bq_col_q bq_col_of(const bq_linear_params &p, bq_i64 n) {
  bq_col_q c;
  c.sw = bq_any_to_c<BQ_WST>(p.w_scales, n);
  c.bias = (p.flags & BQ_LF_BIAS) ? bq_to_c(((const bq_t *)p.bias)[n]) : (bq_c)0;
  c.wsum = (p.flags & BQ_LF_ZP) ? ((const int *)p.w_sums)[n] : 0;
  return c;
}

// The epilogue of one output: ((acc' * sa) * sw) + bias, each step rounded in C.
static __device__ __forceinline__ bq_t bq_epilogue(int acc, const bq_row_q &r, const bq_col_q &c, int flags) {
  if (flags & BQ_LF_K0) return bq_from_c((flags & BQ_LF_BIAS) ? c.bias : (bq_c)0);
  int a2 = (int)((bq_u32)acc - (bq_u32)r.zp * (bq_u32)c.wsum);
  bq_c v = bq_mul(bq_mul(bq_int_to_c(a2), r.sa), c.sw);
  if (flags & BQ_LF_BIAS) v = bq_add(v, c.bias);
  return bq_from_c(v);
}
#endif

// Two neighbouring outputs of row m (columns n and n + 1; n + 1 may be past N).
static __device__ __forceinline__ void bq_store_pair(const bq_linear_params &p, bq_i64 m, bq_i64 n, bq_t v0, bq_t v1) {
  bq_t *y = (bq_t *)p.y + m * p.ldy + n;
  if ((p.flags & BQ_LF_Y2) && n + 1 < p.n) {
    bq_chunk<bq_t, 2> c;
    c.e[0] = v0;
    c.e[1] = v1;
    *(bq_chunk<bq_t, 2> *)y = c;
  } else {
    if (n < p.n) y[0] = v0;
    if (n + 1 < p.n) y[1] = v1;
  }
}

// ---- tensor-core and shared-memory primitives (cp.async: common.cuh) ----------------------------
// The only inline PTX of this file. (tests/emulator supplies host versions of these under
// BQ_EMULATED, to run this file on the CPU; NVRTC never sees that.)
#ifndef BQ_EMULATED
#if BQ_OP == BQ_OP_FP8_LINEAR
#if BQ_IT == BQ_TYPE_E5M2
#define BQ_MMA_F8 ".e5m2.e4m3"
#define BQ_MMA_F8_WX ".e4m3.e5m2" /* weights as A, activations as B */
#else
#define BQ_MMA_F8 ".e4m3.e4m3"
#define BQ_MMA_F8_WX ".e4m3.e4m3"
#endif
// FP8: f32 += A (activations, e4m3 or e5m2) x B (e4m3 weights), the int8 fragments' layout
static __device__ __forceinline__ void bq_mma(float (&d)[4], bq_u32 a0, bq_u32 a1, bq_u32 a2, bq_u32 a3, bq_u32 b0, bq_u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32" BQ_MMA_F8 ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
#else
#if BQ_IT == BQ_TYPE_U8
#define BQ_MMA_TYPES ".s32.u8.s8.s32"
#define BQ_MMA_TYPES_WG ".s32.u8.s8"
#else
#define BQ_MMA_TYPES ".s32.s8.s8.s32"
#define BQ_MMA_TYPES_WG ".s32.s8.s8"
#endif

static __device__ __forceinline__ void bq_mma(int (&d)[4], bq_u32 a0, bq_u32 a1, bq_u32 a2, bq_u32 a3, bq_u32 b0, bq_u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col" BQ_MMA_TYPES " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
#endif

static __device__ __forceinline__ void bq_ldmatrix4(bq_u32 (&r)[4], bq_u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

#if BQ_WGMMA
#if BQ_OP == BQ_OP_FP8_LINEAR
// sm_90a: D[64 x 128] = A[64 x 32] B[128 x 32]^T (+ D when acc), both K-major in shared
// memory; thread t of warp w holds in d[i] row 16 w + t / 4 + 8 ((i / 2) % 2), column
// 8 (i / 4) + 2 (t % 4) + i % 2.
static __device__ __forceinline__ void bq_wgmma_f8(float (&d)[64], bq_u64 da, bq_u64 db, int acc) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k32.f32" BQ_MMA_F8 " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
               : "l"(da), "l"(db), "r"(acc));
}
// ... and D[64 x 16] = W[64 x 32] X[16 x 32]^T: the weight-streaming shape, A the weights
// (d[i] as above, i < 8)
static __device__ __forceinline__ void bq_wgmma_f8_n16(float (&d)[8], bq_u64 da, bq_u64 db, int acc) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n16k32.f32" BQ_MMA_F8_WX " {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
               : "l"(da), "l"(db), "r"(acc));
}
#else
// sm_90a warpgroup MMA: D[64 x 256] (+)= A[64 x 32] B[256 x 32]^T, both K-major in shared
// memory behind descriptors; thread t of warp w of the warpgroup holds in d[i] row
// 16 w + t / 4 + 8 ((i / 2) % 2), column 8 (i / 4) + 2 (t % 4) + i % 2.
static __device__ __forceinline__ void bq_wgmma(int (&d)[128], bq_u64 da, bq_u64 db) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n256k32" BQ_MMA_TYPES_WG " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, 1;\n"
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]), "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]), "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]), "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
               : "l"(da), "l"(db));
}
#endif
static __device__ __forceinline__ void bq_wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void bq_wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> static __device__ __forceinline__ void bq_wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// cp.async writes through the generic proxy; wgmma reads through the async one
static __device__ __forceinline__ void bq_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
#if BQ_OP == BQ_OP_FP8_LINEAR
// mbarriers (a 64-bit object in shared memory: arrivals and bytes still to come; its phases
// alternate in parity) and the tensor memory accelerator's 2-D copies, which count their
// bytes on one
static __device__ __forceinline__ void bq_mbar_init(bq_u32 bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
static __device__ __forceinline__ void bq_mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
static __device__ __forceinline__ void bq_mbar_arrive(bq_u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// an arrival that also announces `bytes` to come from copies
static __device__ __forceinline__ void bq_mbar_expect(bq_u32 bar, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// until the phase of parity `parity` has completed
static __device__ __forceinline__ void bq_mbar_wait(bq_u32 bar, int parity) {
  asm volatile("{\n.reg .pred p;\nBQ_WAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
               "@!p bra BQ_WAIT;\n}\n" ::"r"(bar), "r"(parity) : "memory");
}
// a warpgroup's registers a thread, lowered or raised (every thread of the warpgroup runs it)
template <int N> static __device__ __forceinline__ void bq_setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N> static __device__ __forceinline__ void bq_setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
// the box of the tensor map at (c0 bytes along K, row c1) into shared memory at dst, counted on bar
static __device__ __forceinline__ void bq_tma_load(bq_u32 dst, const void *tmap, int c0, int c1, bq_u32 bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
               ::"r"(dst), "l"(tmap), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
#endif
#endif
static __device__ __forceinline__ void bq_st_shared16(bq_u32 dst, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};\n" ::"r"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
#endif

// 16 bytes of row `row` of an int8 matrix from column k, zero past k_end or for a row
// that does not exist: a 16-byte load when `vec`, else byte by byte.
static __device__ __forceinline__ uint4 bq_load16(const bq_u8 *base, bool row_ok, bq_i64 row, bq_i64 ld, bq_i64 k,
                                                  bq_i64 k_end, bool vec) {
  uint4 v = make_uint4(0, 0, 0, 0);
  if (!row_ok || k >= k_end) return v;
  const bq_u8 *s = base + row * ld + k;
  if (vec && k + 16 <= k_end) return __ldg((const uint4 *)s);
  bq_u32 w[4] = {0, 0, 0, 0};
#pragma unroll
  for (int j = 0; j < 16; j++)
    if (k + j < k_end) w[j >> 2] |= (bq_u32)s[j] << ((j & 3) * 8);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// One 16-byte chunk of a tile into shared memory: cp.async (zero-filling whatever lies
// past K or outside the matrix) when 16-byte aligned, else through registers.
static __device__ __forceinline__ void bq_tile_chunk(bq_u32 dst, const bq_u8 *base, bool row_ok, bq_i64 row,
                                                     bq_i64 ld, bq_i64 k, bq_i64 k_end, bool vec) {
  if (vec) {
    bq_i64 rem = row_ok ? k_end - k : 0;
    int bytes = rem >= 16 ? 16 : rem > 0 ? (int)rem : 0;
    bq_cp_async16(dst, bytes ? (const void *)(base + row * ld + k) : (const void *)base, bytes);
  } else {
    bq_st_shared16(dst, bq_load16(base, row_ok, row, ld, k, k_end, false));
  }
}

#if BQ_OP != BQ_OP_LINEAR_WEIGHT_SUMS
// ---- tiles in shared memory ---------------------------------------------------------------------
// K moves through shared memory in slices of 128 bytes: a row of a slice is 8 chunks of 16
// bytes, chunk c of row r stored at position c ^ (r & 7). ldmatrix and the copies are then
// free of bank conflicts, and with slices 1024-byte aligned this is also the 128-byte
// swizzle that wgmma's shared-memory descriptors read.
#define BQ_BK 128
template <int BM, int BN, int THREADS>
static __device__ __forceinline__ void bq_load_tiles(const bq_linear_params &p, bq_u32 sa, bq_i64 m0, bq_i64 n0, int kt,
                                                     int tid, const bq_u8 *A, const bq_u8 *W, bool avec, bool wvec) {
  const bq_i64 k0 = (bq_i64)kt * BQ_BK;
  const bq_u32 sb = sa + BM * BQ_BK;
#pragma unroll
  for (int i = 0; i < BM * 8 / THREADS; i++) {
    int c = tid + i * THREADS, r = c >> 3, cc = c & 7;
    bq_tile_chunk(sa + r * BQ_BK + ((cc ^ (r & 7)) << 4), A, m0 + r < p.m, m0 + r, p.lda, k0 + cc * 16, p.k, avec);
  }
#pragma unroll
  for (int i = 0; i < BN * 8 / THREADS; i++) {
    int c = tid + i * THREADS, r = c >> 3, cc = c & 7;
    bq_tile_chunk(sb + r * BQ_BK + ((cc ^ (r & 7)) << 4), W, n0 + r < p.n, n0 + r, p.k, k0 + cc * 16, p.k, wvec);
  }
}

// A thread's share of the copies, worked out once a tile: it copies chunk tid % 8 of rows
// tid / 8 + (THREADS / 8) i of both operands. With THREADS / 8 a multiple of 8 every one
// of them lands at the same swizzled offset within its row, so from slice to slice only k
// moves. A slice that lies wholly inside A, W and K, with 16-byte alignment, then costs
// one cp.async a chunk and no bounds arithmetic; the rest (edge tiles, the K tail,
// unaligned operands) take bq_load_tiles.
template <int BM, int BN, int THREADS> struct bq_tile_copier {
  const bq_u8 *a, *w;    // this thread's first chunk of A and of W at k = 0
  bq_i64 a_step, w_step; // THREADS / 8 rows further on
  bq_u32 off;            // its offset within a slice
  int fast_slices;       // slices [0, fast_slices) take the fast path

  __device__ __forceinline__ bq_tile_copier(const bq_linear_params &p, bq_i64 m0, bq_i64 n0, int tid) {
    static_assert(THREADS % 64 == 0 && (BM * 8) % THREADS == 0 && (BN * 8) % THREADS == 0, "tile copier shape");
    const int r = tid >> 3, cc = tid & 7;
    const bool inside = (p.flags & BQ_LF_A16) && (p.flags & BQ_LF_W16) && m0 + BM <= p.m && n0 + BN <= p.n;
    fast_slices = inside ? (int)(p.k / BQ_BK) : 0;
    a = (const bq_u8 *)p.a + (inside ? (m0 + r) * p.lda + cc * 16 : 0);
    w = (const bq_u8 *)p.w + (inside ? (n0 + r) * p.k + cc * 16 : 0);
    a_step = (bq_i64)(THREADS / 8) * p.lda;
    w_step = (bq_i64)(THREADS / 8) * p.k;
    off = r * BQ_BK + ((cc ^ (r & 7)) << 4);
  }

  __device__ __forceinline__ void load(const bq_linear_params &p, bq_u32 sa, bq_i64 m0, bq_i64 n0, int kt, int tid) const {
    if (kt >= fast_slices) {
      bq_load_tiles<BM, BN, THREADS>(p, sa, m0, n0, kt, tid, (const bq_u8 *)p.a, (const bq_u8 *)p.w,
                                     p.flags & BQ_LF_A16, p.flags & BQ_LF_W16);
      return;
    }
    const bq_i64 k0 = (bq_i64)kt * BQ_BK;
    const bq_u8 *pa = a + k0, *pw = w + k0;
#pragma unroll
    for (int i = 0; i < BM * 8 / THREADS; i++) bq_cp_async16(sa + off + i * (THREADS / 8) * BQ_BK, pa + i * a_step, 16);
#pragma unroll
    for (int i = 0; i < BN * 8 / THREADS; i++)
      bq_cp_async16(sa + BM * BQ_BK + off + i * (THREADS / 8) * BQ_BK, pw + i * w_step, 16);
  }
};

// The tile's column parameters (weight scale, bias, weight sum), staged in shared memory
// while the main loop runs, so the epilogue reads them at shared-memory latency: thread
// t < BN stages column n0 + t. Visible after the next __syncthreads.
#define BQ_COLS_SMEM (256 * 24) // room for 256 columns of bq_col_q with C = f64
template <int BN> static __device__ __forceinline__ void bq_stage_cols(const bq_linear_params &p, bq_col_q *cols, bq_i64 n0, int tid) {
  if (tid < BN && n0 + tid < p.n) cols[tid] = bq_col_of(p, n0 + tid);
}
// ... and its 128 rows' parameters, after the columns: thread t < 128 stages row m0 + t
#define BQ_ROWS_SMEM (128 * 16) // room for 128 rows of bq_row_q with C = f64
static __device__ __forceinline__ void bq_stage_rows(const bq_linear_params &p, bq_row_q *rows, bq_i64 m0, int tid) {
  if (tid < 128) rows[tid] = m0 + tid < p.m ? bq_row_of(p, m0 + tid) : bq_row_q{(bq_c)0, 0};
}

// The tiles' epilogue, through shared memory: the kernel has put its accumulators in `tile`
// (BM x BN of ACC, int32 or f32, at a row pitch of BQ_EP_LD, in the pipeline's stages,
// which are free by then), with the columns' and rows' parameters staged. Each warp takes
// whole rows, a lane BN / 32 neighbouring columns, so that y is written in 8- or 16-byte
// pieces where y allows and the epilogue is one short loop. (Unrolled over a thread's
// accumulators it would be a large block of instructions, run once per tile and so always
// from a cold instruction cache, which slows a GEMM that follows another module's kernel.)
#define BQ_EP_LD(BN) ((BN) + 8) // the stores of mma fragments take the fewest wavefronts
// a lane's accumulators of one row of the tile
static __device__ __forceinline__ void bq_tile_get(const int *t, int (&v)[8]) {
  const uint4 a = *(const uint4 *)t, b = *(const uint4 *)(t + 4);
  v[0] = (int)a.x, v[1] = (int)a.y, v[2] = (int)a.z, v[3] = (int)a.w;
  v[4] = (int)b.x, v[5] = (int)b.y, v[6] = (int)b.z, v[7] = (int)b.w;
}
template <int C> static __device__ __forceinline__ void bq_tile_get(const float *t, float (&v)[C]) {
#pragma unroll
  for (int i = 0; i < C; i += 4) {
    const float4 a = *(const float4 *)(t + i);
    v[i] = a.x, v[i + 1] = a.y, v[i + 2] = a.z, v[i + 3] = a.w;
  }
}
template <int BM, int BN, typename ACC>
static __device__ __forceinline__ void bq_tile_epilogue(const bq_linear_params &p, const ACC *tile, const bq_col_q *cols,
                                                        const bq_row_q *rows, bq_i64 m0, bq_i64 n0) {
  constexpr int C = BN / 32; // a lane's columns: 32 lanes cover the tile's width
  static_assert(C == 4 || C == 8, "a lane's columns fill whole 16-byte reads of the tile");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5, c0 = C * lane;
  const bq_i64 n = n0 + c0;
  if (n >= p.n) return;
  bq_col_q cq[C];
#pragma unroll
  for (int c = 0; c < C; c++) cq[c] = n + c < p.n ? cols[c0 + c] : cols[c0];
  const bool yv = (p.flags & BQ_LF_Y8) && n + C <= p.n; // (y on the 8-element grid: on the C-element one)
#pragma unroll 1
  for (int r = warp; r < BM && m0 + r < p.m; r += nwarps) {
    const bq_row_q rq = rows[r];
    ACC v[C];
    bq_tile_get(tile + r * BQ_EP_LD(BN) + c0, v);
    bq_chunk<bq_t, C> out;
#pragma unroll
    for (int c = 0; c < C; c++) out.e[c] = bq_epilogue(v[c], rq, cq[c], p.flags);
    if (yv) {
      *(bq_chunk<bq_t, C> *)((bq_t *)p.y + (m0 + r) * p.ldy + n) = out;
    } else {
#pragma unroll
      for (int c = 0; c < C; c += 2) bq_store_pair(p, m0 + r, n + c, out.e[c], out.e[c + 1]);
    }
  }
}

// One accumulator pair of an mma fragment (row r, columns c and c + 1) into the tile.
static __device__ __forceinline__ void bq_tile_put(int *tile, int ld, int r, int c, int v0, int v1) {
  uint2 u;
  u.x = (bq_u32)v0;
  u.y = (bq_u32)v1;
  *(uint2 *)(tile + r * ld + c) = u;
}
static __device__ __forceinline__ void bq_tile_put(float *tile, int ld, int r, int c, float v0, float v1) {
  *(float2 *)(tile + r * ld + c) = make_float2(v0, v1);
}

// The tile a CTA computes: tiles in groups of 8 tile-rows that walk the tile-columns
// together (L2 reuse).
static __device__ __forceinline__ void bq_tile_of(const bq_linear_params &p, int bm, int bn, bq_i64 &m0, bq_i64 &n0) {
  const int bid = blockIdx.x, per_group = 8 * p.tiles_n, first_m = (bid / per_group) * 8;
  const int gsize = min(p.tiles_m - first_m, 8), in_group = bid % per_group;
  m0 = (bq_i64)(first_m + in_group % gsize) * bm;
  n0 = (bq_i64)(in_group / gsize) * bn;
}

// ---- the tiled GEMM (mma.sync) ----------------------------------------------------------------
// A CTA computes a BM x BN tile of y; each warp a WM x WN piece of it, STAGES slices of K
// in flight through cp.async.

// Accumulators of I x J mma fragments, all zero.
template <typename ACC, int I, int J> static __device__ __forceinline__ void bq_zero(ACC (&acc)[I][J][4]) {
#pragma unroll
  for (int i = 0; i < I; i++)
#pragma unroll
    for (int j = 0; j < J; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0;
}

// A's mma fragments for step ks of the slice of K at sa: the warp's WM rows from wm WM
// (ldmatrix). W's stay inline in bq_gemm_tiled: moved to a function they change the SASS.
template <int WM>
static __device__ __forceinline__ void bq_frags_a(bq_u32 (&af)[WM / 16][4], bq_u32 sa, int wm, int ks, int lane) {
#pragma unroll
  for (int i = 0; i < WM / 16; i++) {
    int r = wm * WM + i * 16 + (lane & 15), c = ks * 2 + (lane >> 4);
    bq_ldmatrix4(af[i], sa + r * BQ_BK + ((c ^ (r & 7)) << 4));
  }
}

// A warp's accumulators into the epilogue's tile: acc[i][j][2 h + e] is row
// wm WM + 16 i + lane / 4 + 8 h, column wn WN + 8 j + 2 (lane % 4) + e
template <int BN, int WM, int WN, typename ACC>
static __device__ __forceinline__ void bq_gemm_put(ACC *tile, const ACC (&acc)[WM / 16][WN / 8][4], int wm, int wn,
                                                   int lane) {
  constexpr int MT = WM / 16, NT = WN / 8;
#pragma unroll
  for (int i = 0; i < MT; i++)
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
      for (int h = 0; h < 2; h++)
        bq_tile_put(tile, BQ_EP_LD(BN), wm * WM + i * 16 + (lane >> 2) + 8 * h, wn * WN + j * 8 + (lane & 3) * 2,
                    acc[i][j][2 * h], acc[i][j][2 * h + 1]);
}

// ACC: int (int8 operands: every step chained into acc) or float (FP8: a slice of K, 128
// elements, is one block, whose four steps chain into part from zero; part then joins acc
// through bq_blk_scale, block after block in order, as on the wgmma tiles)
template <int BM, int BN, int WM, int WN, int STAGES, typename ACC>
static __device__ __forceinline__ void bq_gemm_tiled(const bq_linear_params &p, unsigned char *smem) {
  constexpr int WARPS_N = BN / WN, THREADS = (BM / WM) * (BN / WN) * 32;
  constexpr int MT = WM / 16, NT = WN / 8, STAGE = (BM + BN) * BQ_BK;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  bq_i64 m0, n0;
  bq_tile_of(p, BM, BN, m0, n0);
  const int ktiles = (int)((p.k + BQ_BK - 1) / BQ_BK);
  const bq_u32 sbase = bq_smem_addr(smem);
  const bq_tile_copier<BM, BN, THREADS> copier(p, m0, n0, tid);
  auto load = [&](int stage, int kt) { copier.load(p, sbase + stage * STAGE, m0, n0, kt, tid); };
  bq_col_q *cols = (bq_col_q *)(smem + STAGES * STAGE);
  bq_row_q *rows = (bq_row_q *)((unsigned char *)cols + BQ_COLS_SMEM);
  bq_stage_cols<BN>(p, cols, n0, tid);
  bq_stage_rows(p, rows, m0, tid);

  constexpr bool FP8 = sizeof(ACC) == 4 && (ACC)0.5f != 0; // f32 accumulators: per-block promotion
  ACC acc[MT][NT][4], part[MT][NT][4];
  bq_zero(acc);
#pragma unroll
  for (int s = 0; s < STAGES - 1; s++) {
    if (s < ktiles) load(s, s);
    bq_cp_commit();
  }
  for (int kt = 0; kt < ktiles; kt++) {
    bq_cp_wait<STAGES - 2>();
    __syncthreads(); // slice kt has landed, and every warp is done with slice kt - 1
    if (kt + STAGES - 1 < ktiles) load((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
    bq_cp_commit();
    const bq_u32 sa = sbase + (kt % STAGES) * STAGE, sb = sa + BM * BQ_BK;
#if BQ_OP == BQ_OP_FP8_LINEAR
    float bs[MT][2]; // the block's scales of the lane's rows (loads in flight over the mma)
    if constexpr (FP8) {
      bq_zero(part);
#pragma unroll
      for (int i = 0; i < MT; i++)
#pragma unroll
        for (int h = 0; h < 2; h++) bs[i][h] = bq_blk_scale(p, m0 + wm * WM + i * 16 + (lane >> 2) + 8 * h, n0 >> 7, kt);
    }
#endif
#pragma unroll
    for (int ks = 0; ks < BQ_BK / 32; ks++) {
      bq_u32 af[MT][4], bf[NT][2];
      bq_frags_a<WM>(af, sa, wm, ks, lane);
#pragma unroll
      for (int j = 0; j < NT; j += 2) {
        int r = wn * WN + j * 8 + (lane & 7) + ((lane >> 4) << 3), c = ks * 2 + ((lane >> 3) & 1);
        bq_u32 t[4];
        bq_ldmatrix4(t, sb + r * BQ_BK + ((c ^ (r & 7)) << 4));
        bf[j][0] = t[0];
        bf[j][1] = t[1];
        bf[j + 1][0] = t[2];
        bf[j + 1][1] = t[3];
      }
#pragma unroll
      for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
          bq_mma(FP8 ? part[i][j] : acc[i][j], af[i][0], af[i][1], af[i][2], af[i][3], bf[j][0], bf[j][1]);
    }
#if BQ_OP == BQ_OP_FP8_LINEAR
    if constexpr (FP8) {
#pragma unroll
      for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
          for (int e = 0; e < 4; e++) acc[i][j][e] = __fmaf_rn(part[i][j][e], bs[i][e >> 1], acc[i][j][e]);
    }
#endif
  }
  bq_cp_wait<0>();
  __syncthreads(); // every warp is done with the stages; the staged columns and rows are visible

  // the epilogue, through a tile in the stages
  static_assert(BM * BQ_EP_LD(BN) * 4 <= STAGES * STAGE, "the epilogue's tile fits in the stages");
  ACC *tile = (ACC *)smem;
  bq_gemm_put<BN, WM, WN>(tile, acc, wm, wn, lane);
  __syncthreads();
  bq_tile_epilogue<BM, BN>(p, tile, cols, rows, m0, n0);
}

#if !BQ_WGMMA
// 128 x 256 tiles, 8 warps of 64 x 64, 3 slices in flight (144 KiB of shared memory). (A
// 128 x 128 variant with two CTAs an SM is one template argument away; it is left out
// until the benchmark shows a shape that needs it: every tile costs compile time.)
#if BQ_E_GEMM_LARGE
extern "C" __global__ void BQ_LB_GEMM_LARGE BQ_FN_GEMM_LARGE(const bq_linear_params p) {
  BQ_DYNAMIC_SMEM(smem);
  bq_gemm_tiled<128, 256, 64, 64, 3, int>(p, smem);
}
#endif
// FP8: 128 x 128 tiles with f32 accumulators, 8 warps of 32 x 64 (the block's partial sums
// double the accumulators; 64 x 32 spills), 4 slices in flight; sm_89 and sm_90 modules
#define BQ_F8G_STAGES 4
#if BQ_E_FP8_GEMM
extern "C" __global__ void BQ_LB_FP8_GEMM BQ_FN_FP8_GEMM(const bq_linear_params p) {
  BQ_DYNAMIC_SMEM(smem);
  bq_gemm_tiled<128, 128, 32, 64, BQ_F8G_STAGES, float>(p, smem);
}
#endif
#else
// an sm_90a module tiles with wgmma only (the host never launches these there)
#if BQ_E_GEMM_LARGE
extern "C" __global__ void BQ_FN_GEMM_LARGE(const bq_linear_params p) { __trap(); }
#endif
#if BQ_E_FP8_GEMM
extern "C" __global__ void BQ_FN_FP8_GEMM(const bq_linear_params p) { __trap(); }
#endif
#endif

// ---- sm_90a: warpgroup MMA (wgmma) --------------------------------------------------------------------
// 128 x 256 tiles, two warpgroups of 64 x 256 (128 int32 accumulators a thread), four slices
// of K in shared memory: the copy of slice kt + 2 overlaps the wgmma of slices kt and
// kt - 1 (one wgmma group stays in flight, so the slice it reads is never the one being
// refilled). Only modules for sm_90a have it (BQ_WGMMA); elsewhere the entry point traps.
#define BQ_WG_STAGES 4
#if BQ_WGMMA
// A K-major operand in the 128-byte swizzle, rows of 128 bytes in groups of 8 that lie
// 1024 bytes apart (the leading byte offset is unused in this mode): start address >> 4,
// stride byte offset >> 4 at bit 32, swizzle mode 1 (128 bytes) at bit 62.
static __device__ __forceinline__ bq_u64 bq_wg_desc(bq_u32 addr) {
  return (bq_u64)((addr & 0x3FFFF) >> 4) | ((bq_u64)1 << 16) | ((bq_u64)(1024 >> 4) << 32) | ((bq_u64)1 << 62);
}
// A warpgroup's wgmma accumulators (m64nBN: BN / 2 a thread, of ACC) into the epilogue's
// tile: thread (w, lane) of warpgroup wg holds in acc[4 j + 2 h + e] row 64 wg + 16 w +
// lane / 4 + 8 h, column 8 j + 2 (lane % 4) + e.
template <int BN, typename ACC>
static __device__ __forceinline__ void bq_wg_put(ACC *tile, const ACC (&acc)[BN / 2], int wg, int w, int lane) {
#pragma unroll
  for (int j = 0; j < BN / 8; j++)
#pragma unroll
    for (int h = 0; h < 2; h++)
      bq_tile_put(tile, BQ_EP_LD(BN), 64 * wg + 16 * w + (lane >> 2) + 8 * h, 8 * j + 2 * (lane & 3), acc[4 * j + 2 * h],
                  acc[4 * j + 2 * h + 1]);
}

#if BQ_E_GEMM_WGMMA
extern "C" __global__ void BQ_LB_GEMM_WGMMA BQ_FN_GEMM_WGMMA(const bq_linear_params p) {
  BQ_DYNAMIC_SMEM(smem);
  constexpr int BM = 128, BN = 256, STAGE = (BM + BN) * BQ_BK;
  const int tid = threadIdx.x, lane = tid & 31, wg = tid >> 7, w = (tid >> 5) & 3;
  bq_i64 m0, n0;
  bq_tile_of(p, BM, BN, m0, n0);
  const int ktiles = (int)((p.k + BQ_BK - 1) / BQ_BK);
  const bq_u32 sbase = (bq_smem_addr(smem) + 1023u) & ~1023u; // the swizzle's 1024-byte groups
  const bq_tile_copier<BM, BN, 256> copier(p, m0, n0, tid);
  unsigned char *stages = smem + (sbase - bq_smem_addr(smem));
  bq_col_q *cols = (bq_col_q *)(stages + BQ_WG_STAGES * STAGE);
  bq_row_q *rows = (bq_row_q *)((unsigned char *)cols + BQ_COLS_SMEM);
  bq_stage_cols<BN>(p, cols, n0, tid);
  bq_stage_rows(p, rows, m0, tid);

  int acc[128];
#pragma unroll
  for (int i = 0; i < 128; i++) acc[i] = 0;
#pragma unroll
  for (int s = 0; s < 2; s++) {
    if (s < ktiles) copier.load(p, sbase + s * STAGE, m0, n0, s, tid);
    bq_cp_commit();
  }
  for (int kt = 0; kt < ktiles; kt++) {
    bq_cp_wait<1>();        // slice kt has landed (kt + 1 may still be in flight)
    bq_fence_proxy_async(); // ... and is visible to the tensor cores
    __syncthreads();        // every thread's part of it; every wgmma of slice kt - 2 is done
    if (kt + 2 < ktiles)
      copier.load(p, sbase + ((kt + 2) % BQ_WG_STAGES) * STAGE, m0, n0, kt + 2, tid);
    bq_cp_commit();
    const bq_u32 sa = sbase + (kt % BQ_WG_STAGES) * STAGE + wg * 64 * BQ_BK, sb = sbase + (kt % BQ_WG_STAGES) * STAGE + BM * BQ_BK;
    bq_wg_fence();
#pragma unroll
    for (int ks = 0; ks < BQ_BK / 32; ks++) bq_wgmma(acc, bq_wg_desc(sa + ks * 32), bq_wg_desc(sb + ks * 32));
    bq_wg_commit();
    bq_wg_wait<1>();
  }
  bq_wg_wait<0>();
  bq_cp_wait<0>();
  __syncthreads(); // every wgmma and copy is done; the staged columns and rows are visible

  // the epilogue, through the tile
  int *tile = (int *)stages;
  bq_wg_put<BN>(tile, acc, wg, w, lane);
  __syncthreads();
  bq_tile_epilogue<BM, BN>(p, tile, cols, rows, m0, n0);
}
#endif

// ---- sm_90a, FP8: the tensor cores' sums promoted to f32 every 128 elements of K -------------------
// 128 x 128 tiles, two warpgroups of 64 x 128. A slice of K (128 elements) is summed by
// four wgmma (the first not adding the accumulator: part starts from zero), waited for,
// then joins acc in f32 (fma with the block's scale, 1 unless blockwise; a 128 x 128 tile
// lies in one weight block), slice after slice in order: the rounding of the tensor cores
// (whose FP8 sums keep fewer bits than f32) reaches over 128 products at most, and every
// output is the same sum of the same partial sums whatever tile or M it falls in. Both
// accumulator sets (64 + 64 a thread) would not fit with 256 columns. BQ_F8_STAGES slices
// in flight: each warpgroup waits for its own wgmma every slice, so the copies run ahead.
#define BQ_F8_STAGES 5
#define BQ_F8_SCALES 144 // floats a stage for blockwise scales: 128 rows', then the weight block's
#if BQ_E_FP8_WGMMA || BQ_E_FP8_WGMMA_BLK
// BLK (blockwise scales, their own entry point so that the other modes' loop stays bare):
// every stage also carries its block's scales, copied by cp.async with the tiles (thread t
// < 128 the scale of row m0 + t, thread 128 the weight block's), so each block's scale
// product s_b = sa * sw is at hand when its sum joins acc by fma(part, s_b, acc).
template <bool BLK> static __device__ __forceinline__ void bq_fp8_wgmma_tiles(const bq_linear_params &p) {
  BQ_DYNAMIC_SMEM(smem);
  constexpr int BM = 128, BN = 128, STAGE = (BM + BN) * BQ_BK, S = BQ_F8_STAGES;
  const int tid = threadIdx.x, lane = tid & 31, wg = tid >> 7, w = (tid >> 5) & 3;
  bq_i64 m0, n0;
  bq_tile_of(p, BM, BN, m0, n0);
  const int ktiles = (int)((p.k + BQ_BK - 1) / BQ_BK);
  const bq_u32 sbase = (bq_smem_addr(smem) + 1023u) & ~1023u; // the swizzle's 1024-byte groups
  const bq_tile_copier<BM, BN, 256> copier(p, m0, n0, tid);
  unsigned char *stages = smem + (sbase - bq_smem_addr(smem));
  float *bscales = (float *)(stages + S * STAGE); // BLK: [S][BQ_F8_SCALES]
  bq_col_q *cols = (bq_col_q *)(stages + S * STAGE + (BLK ? S * BQ_F8_SCALES * 4 : 0));
  bq_row_q *rows = (bq_row_q *)((unsigned char *)cols + BQ_COLS_SMEM);
  bq_stage_cols<BN>(p, cols, n0, tid);
  bq_stage_rows(p, rows, m0, tid);
  auto load = [&](int s, int kt) {
    copier.load(p, sbase + s * STAGE, m0, n0, kt, tid);
    if constexpr (BLK) bq_blk_scale_copy(p, bq_smem_addr(bscales + s * BQ_F8_SCALES), m0, n0 >> 7, BM, kt, tid);
  };

  float acc[64], part[64];
#pragma unroll
  for (int i = 0; i < 64; i++) acc[i] = 0.0f;
#pragma unroll
  for (int s = 0; s < S - 1; s++) {
    if (s < ktiles) load(s, s);
    bq_cp_commit();
  }
  for (int kt = 0; kt < ktiles; kt++) {
    bq_cp_wait<S - 2>();    // slice kt has landed
    bq_fence_proxy_async(); // ... and is visible to the tensor cores
    __syncthreads();        // every thread's part of it; both warpgroups are done with slice kt - 1
    if (kt + S - 1 < ktiles) load((kt + S - 1) % S, kt + S - 1);
    bq_cp_commit();
    const bq_u32 sa = sbase + (kt % S) * STAGE + wg * 64 * BQ_BK, sb = sbase + (kt % S) * STAGE + BM * BQ_BK;
    bq_wg_fence();
#pragma unroll
    for (int ks = 0; ks < BQ_BK / 32; ks++) bq_wgmma_f8(part, bq_wg_desc(sa + ks * 32), bq_wg_desc(sb + ks * 32), ks);
    bq_wg_commit();
    if constexpr (BLK) {
      // the block's scales of the thread's two rows, read while the tensor cores sum
      const float *bs = bscales + (kt % S) * BQ_F8_SCALES;
      const int r = 64 * wg + 16 * w + (lane >> 2);
      const float s0 = __fmul_rn(bs[r], bs[BM]), s1 = __fmul_rn(bs[r + 8], bs[BM]);
      bq_wg_wait<0>();
#pragma unroll
      for (int i = 0; i < 64; i++) acc[i] = __fmaf_rn(part[i], (i & 2) ? s1 : s0, acc[i]);
    } else {
      bq_wg_wait<0>();
#pragma unroll
      for (int i = 0; i < 64; i++) acc[i] = __fadd_rn(acc[i], part[i]);
    }
  }
  bq_cp_wait<0>();
  __syncthreads(); // every copy is done; the staged columns and rows are visible

  // the epilogue, through the tile
  float *tile = (float *)stages;
  bq_wg_put<BN>(tile, acc, wg, w, lane);
  __syncthreads();
  bq_tile_epilogue<BM, BN>(p, tile, cols, rows, m0, n0);
}
#endif
#if BQ_E_FP8_WGMMA
extern "C" __global__ void BQ_LB_FP8_WGMMA BQ_FN_FP8_WGMMA(const bq_linear_params p) { bq_fp8_wgmma_tiles<false>(p); }
#endif
#if BQ_E_FP8_WGMMA_BLK
extern "C" __global__ void BQ_LB_FP8_WGMMA BQ_FN_FP8_WGMMA_BLK(const bq_linear_params p) { bq_fp8_wgmma_tiles<true>(p); }
#endif

// ---- sm_90a, FP8, 16-byte aligned operands: the same sums fed by the tensor memory accelerator --
// 192 x 128 tiles: a producer warpgroup and three consumer warpgroups of 64 rows, which meet
// only at mbarriers: the producer's one thread copies slice g (the 192 x 128 and 128 x 128
// boxes of x and w) into stage g % S once the consumers have released it (empty), each consumer
// warpgroup waits for it (full), runs its four wgmma, and releases it as soon as they have
// read it. One warpgroup's m64n128 wgmma alone keep the tensor cores about half busy, and
// each warpgroup waits for its slice's sums before it promotes them: with three, two still
// sum while the third promotes, and no thread that computes issues a copy. A CTA takes tiles
// blockIdx.x, + gridDim.x, ... (the grid may be smaller than the tiles): the slices count on
// across them, so the producer fills the next tile's stages while the consumers store this
// one's outputs, straight from their registers. Blockwise, each consumer thread also copies
// the block scales it reads (its two rows' and the weight block's) with cp.async into a ring
// of its own in shared memory, BQ_F8T_AHEAD slices ahead of the slice it sums
// (bq_f8t_scales), so neither the producer nor the full barrier waits on those loads. The
// sums are those of bq_fp8_wgmma, formed and promoted in the same order (the copies
// zero-fill past M, N and K as its do), and the epilogue is the same function: the same bits.
#define BQ_F8T_STAGES 5
#define BQ_F8T_WGS 3   // consumer warpgroups, 64 rows of the tile each
#define BQ_F8T_AHEAD 4 // blockwise: slices a consumer thread's scale copies run ahead
// Registers a thread, by warpgroup: launched at 128 (65,536 over 512 threads), the producer
// warpgroup gives back what its one copying thread does not need, and each consumer thread
// takes 152 (its 128 accumulators and the rest; 40 + 3 x 152 a warp on each scheduler)
#define BQ_F8T_PRODUCER_REGS 40
#define BQ_F8T_CONSUMER_REGS 152
#if BQ_E_FP8_TMA || BQ_E_FP8_TMA_BLK
// tile t of the grouped order bq_tile_of walks
static __device__ __forceinline__ void bq_tile_at(const bq_linear_params &p, int t, int bm, int bn, bq_i64 &m0, bq_i64 &n0) {
  const int per_group = 8 * p.tiles_n, first_m = (t / per_group) * 8;
  const int gsize = min(p.tiles_m - first_m, 8), in_group = t % per_group;
  m0 = (bq_i64)(first_m + in_group % gsize) * bm;
  n0 = (bq_i64)(in_group / gsize) * bn;
}
// Blockwise: consumer thread c (row r of the tile, and r + 8) copies the scales slice gs
// (counted over the CTA's tiles) multiplies its sums by into slot gs % (BQ_F8T_AHEAD + 1) of
// the ring at `ring` ([slot][a row's, the row + 8's, the weight block's][C] floats, C the
// consumer threads), rows past M zero-filled, and commits them as one group; a slice past
// the CTA's last tile copies nothing but still commits its (empty) group, so that every
// slice has one.
static __device__ __forceinline__ void bq_f8t_scales(const bq_linear_params &p, bq_u32 ring, int gs, int ktiles,
                                                     int r, int c) {
  const int t = (int)blockIdx.x + gs / ktiles * (int)gridDim.x, kt = gs % ktiles;
  if (t < p.tiles_m * p.tiles_n) {
    bq_i64 m0, n0;
    constexpr int C = 128 * BQ_F8T_WGS;
    bq_tile_at(p, t, 64 * BQ_F8T_WGS, 128, m0, n0);
    const bq_u32 d = ring + (gs % (BQ_F8T_AHEAD + 1)) * (3 * C * 4) + 4 * c;
    const bq_i64 m = m0 + r;
    const float *sa = (const float *)p.a_scales;
    bq_cp_async4(d, sa + (m < p.m ? bq_sa_at(p, m, kt) : 0), m < p.m ? 4 : 0);
    bq_cp_async4(d + C * 4, sa + (m + 8 < p.m ? bq_sa_at(p, m + 8, kt) : 0), m + 8 < p.m ? 4 : 0);
    bq_cp_async4(d + 2 * C * 4, (const float *)p.w_scales + bq_sw_at(p, n0 >> 7, kt), 4);
  }
  bq_cp_commit();
}
template <bool BLK> static __device__ __forceinline__ void bq_fp8_tma_tiles(const bq_fp8_tma_params &q) {
  const bq_linear_params &p = q.p;
  BQ_DYNAMIC_SMEM(smem);
  constexpr int BM = 64 * BQ_F8T_WGS, BN = 128, STAGE = (BM + BN) * BQ_BK, S = BQ_F8T_STAGES, C = 128 * BQ_F8T_WGS;
  const int tid = threadIdx.x, lane = tid & 31, wg = tid >> 7, w = (tid >> 5) & 3;
  const int ktiles = (int)((p.k + BQ_BK - 1) / BQ_BK), tiles = p.tiles_m * p.tiles_n;
  const bq_u32 sbase = (bq_smem_addr(smem) + 1023u) & ~1023u; // the swizzle's 1024-byte groups
  const bq_u32 full = sbase + S * STAGE, empty = full + 8 * S; // S mbarriers each
  const bq_u32 ring = empty + 8 * S; // BLK: the consumers' scale rings (bq_f8t_scales)
  if (tid == 0) {
    for (int s = 0; s < S; s++) {
      bq_mbar_init(full + 8 * s, 1);    // the producer's arrival (and the boxes' bytes)
      bq_mbar_init(empty + 8 * s, C);   // every consumer thread's
    }
    bq_mbar_init_fence();
  }
  __syncthreads();

  // FP8 QuantizedLinear (BQ_LF_PDL): launched while the activations' kernel runs; the
  // producer copies its first tile's first weight boxes, then every thread waits for that
  // kernel (bq_wait_prior_grid) before anything it writes (x, its scales) is read
  const bool pdl = p.flags & BQ_LF_PDL;
  if (wg == BQ_F8T_WGS) { // the producer warpgroup: its registers go to the consumers
    bq_setmaxnreg_dec<BQ_F8T_PRODUCER_REGS>();
    if (tid != C) return;
    int pre = 0; // slices whose weight box is already on its way
    if (pdl && lane == 0 && (int)blockIdx.x < tiles) {
      bq_i64 m0, n0;
      bq_tile_at(p, blockIdx.x, BM, BN, m0, n0);
      for (pre = 0; pre < S && pre < ktiles; pre++) {
        bq_mbar_expect(full + 8 * pre, STAGE);
        bq_tma_load(sbase + pre * STAGE + BM * BQ_BK, q.tmap_w, pre * BQ_BK, (int)n0, full + 8 * pre);
      }
    }
    if (pdl) bq_wait_prior_grid();
    int g = 0; // slices so far, over every tile of this CTA
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      bq_i64 m0, n0;
      bq_tile_at(p, t, BM, BN, m0, n0);
      for (int kt = 0; kt < ktiles; kt++, g++) {
        const int s = g % S;
        if (g >= S) bq_mbar_wait(empty + 8 * s, (g / S - 1) & 1); // its last use is over
        if (g >= pre) {
          bq_mbar_expect(full + 8 * s, STAGE);
          bq_tma_load(sbase + s * STAGE + BM * BQ_BK, q.tmap_w, kt * BQ_BK, (int)n0, full + 8 * s);
        }
        bq_tma_load(sbase + s * STAGE, q.tmap_a, kt * BQ_BK, (int)m0, full + 8 * s);
      }
    }
    return;
  }
  bq_setmaxnreg_inc<BQ_F8T_CONSUMER_REGS>();
  if (pdl) bq_wait_prior_grid();
  // the thread's rows in a tile: r and r + 8
  const int r = 64 * wg + 16 * w + (lane >> 2);
  if constexpr (BLK)
    for (int j = 0; j < BQ_F8T_AHEAD; j++) bq_f8t_scales(p, ring, j, ktiles, r, tid);
  int g = 0;
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    bq_i64 m0, n0;
    bq_tile_at(p, t, BM, BN, m0, n0);
    const bq_i64 m = m0 + r;
    float acc[64], part[64];
#pragma unroll
    for (int i = 0; i < 64; i++) acc[i] = 0.0f;
    for (int kt = 0; kt < ktiles; kt++, g++) {
      const int s = g % S;
      if constexpr (BLK) bq_f8t_scales(p, ring, g + BQ_F8T_AHEAD, ktiles, r, tid);
      bq_mbar_wait(full + 8 * s, (g / S) & 1);
      const bq_u32 sa = sbase + s * STAGE + wg * 64 * BQ_BK, sb = sbase + s * STAGE + BM * BQ_BK;
      bq_wg_fence();
#pragma unroll
      for (int ks = 0; ks < BQ_BK / 32; ks++) bq_wgmma_f8(part, bq_wg_desc(sa + ks * 32), bq_wg_desc(sb + ks * 32), ks);
      bq_wg_commit();
      float s0 = 1.0f, s1 = 1.0f; // BLK: the rows' block scale products (0 past M, never stored)
      if constexpr (BLK) {
        bq_cp_wait<BQ_F8T_AHEAD>(); // slice g's group has landed
        const float *bs = (const float *)(smem + (ring - bq_smem_addr(smem))) + (g % (BQ_F8T_AHEAD + 1)) * 3 * C;
        s0 = __fmul_rn(bs[tid], bs[2 * C + tid]), s1 = __fmul_rn(bs[C + tid], bs[2 * C + tid]);
      }
      bq_wg_wait<0>();
      bq_mbar_arrive(empty + 8 * s);
      if constexpr (BLK) {
#pragma unroll
        for (int i = 0; i < 64; i++) acc[i] = __fmaf_rn(part[i], (i & 2) ? s1 : s0, acc[i]);
      } else {
#pragma unroll
        for (int i = 0; i < 64; i++) acc[i] = __fadd_rn(acc[i], part[i]);
      }
    }
    // the epilogue from the accumulators: acc[4 j + 2 h + e] is row m + 8 h, column
    // n0 + 8 j + 2 (lane % 4) + e (the columns' parameters read once for both rows)
    const bq_row_q r0 = m < p.m ? bq_row_of(p, m) : bq_row_q{(bq_c)0, 0};
    const bq_row_q r1 = m + 8 < p.m ? bq_row_of(p, m + 8) : bq_row_q{(bq_c)0, 0};
#pragma unroll
    for (int j = 0; j < BN / 8; j++) {
      const bq_i64 n = n0 + 8 * j + 2 * (lane & 3);
      if (n >= p.n) continue;
      const bq_col_q c0 = bq_col_of(p, n), c1 = n + 1 < p.n ? bq_col_of(p, n + 1) : c0;
      if (m < p.m)
        bq_store_pair(p, m, n, bq_epilogue(acc[4 * j], r0, c0, p.flags), bq_epilogue(acc[4 * j + 1], r0, c1, p.flags));
      if (m + 8 < p.m)
        bq_store_pair(p, m + 8, n, bq_epilogue(acc[4 * j + 2], r1, c0, p.flags),
                      bq_epilogue(acc[4 * j + 3], r1, c1, p.flags));
    }
  }
}
#endif
#if BQ_E_FP8_TMA
extern "C" __global__ void __launch_bounds__(128 * BQ_F8T_WGS + 128, 1) BQ_FN_FP8_TMA(const __grid_constant__ bq_fp8_tma_params q) {
  bq_fp8_tma_tiles<false>(q);
}
#endif
#if BQ_E_FP8_TMA_BLK
extern "C" __global__ void __launch_bounds__(128 * BQ_F8T_WGS + 128, 1) BQ_FN_FP8_TMA_BLK(const __grid_constant__ bq_fp8_tma_params q) {
  bq_fp8_tma_tiles<true>(q);
}
#endif

// ---- sm_90a, FP8, M <= 64: weight streaming on the same partial sums --------------------------
// The tiles' operands trade places: 64 weight rows are wgmma's A (m64), 16 activation rows
// its B (n16). The tensor cores' sum of a 128-element block does not depend on the
// instruction's shape or on which operand a row is in, so every output is the same sum of
// the same partial sums as in bq_fp8_wgmma (the GPU test checks it bit for bit): a row's
// result does not depend on M. A CTA (one warpgroup) owns 64 output columns and 16 rows of
// x (blockIdx.y: passes of 16 rows, whose weight reads after the first come from L2); K
// streams through BQ_F8V_STAGES stages of 16 + 64 rows of 128 bytes (x's, then w's), each
// filled by every thread, so the weight's bytes in flight keep its SM reading.
#define BQ_F8V_STAGES 8
#define BQ_F8V_SCALES 20 // floats a stage for blockwise scales: 16 rows', then the weight block's
#if BQ_E_FP8_GEMV || BQ_E_FP8_GEMV_BLK
// BLK: the stages carry the block's scales as bq_fp8_wgmma_tiles' do (threads 0..15 the
// rows', 16 the weight block's)
template <bool BLK> static __device__ __forceinline__ void bq_fp8_gemv_body(const bq_linear_params &p) {
  BQ_DYNAMIC_SMEM(smem);
  constexpr int BX = 16, BW = 64, STAGE = (BX + BW) * BQ_BK, S = BQ_F8V_STAGES;
  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
  const bq_i64 n0 = (bq_i64)blockIdx.x * BW, m0 = (bq_i64)blockIdx.y * BX;
  const int ktiles = (int)((p.k + BQ_BK - 1) / BQ_BK);
  const bq_u32 sbase = (bq_smem_addr(smem) + 1023u) & ~1023u; // the swizzle's 1024-byte groups
  // A thread copies chunk tid % 8 of row r = tid / 8 of x's 16 and of rows r + 16 i of w's 64,
  // all at one swizzled offset. With 16-byte aligned operands and whole weight rows, one
  // cp.async a chunk: x's rows past M and the K tail zero-filled (src-size 0); else the
  // bounds-checked copies of the tiles (bq_load_tiles).
  const int r = tid >> 3, cc = tid & 7;
  const bool fast = (p.flags & BQ_LF_A16) && (p.flags & BQ_LF_W16) && n0 + BW <= p.n, xrow = m0 + r < p.m;
  const bq_u8 *xs = (const bq_u8 *)p.a + (xrow ? (m0 + r) * p.lda + cc * 16 : 0);
  const bq_u8 *ws = (const bq_u8 *)p.w + (fast ? (n0 + r) * p.k + cc * 16 : 0);
  const bq_u32 off = r * BQ_BK + ((cc ^ (r & 7)) << 4);
  unsigned char *stages = smem + (sbase - bq_smem_addr(smem));
  float *bscales = (float *)(stages + S * STAGE); // BLK: [S][BQ_F8V_SCALES]
  // what: 1 the slice's rows of x (and blockwise scales), 2 its weight rows, 3 both
  auto load = [&](int stage, int kt, int what) {
    const bq_u32 d = sbase + stage * STAGE;
    if constexpr (BLK)
      if (what & 1) bq_blk_scale_copy(p, bq_smem_addr(bscales + stage * BQ_F8V_SCALES), m0, n0 >> 7, BX, kt, tid);
    if (!fast) {
      bq_load_tiles<BX, BW, 128>(p, d, m0, n0, kt, tid, (const bq_u8 *)p.a, (const bq_u8 *)p.w, p.flags & BQ_LF_A16,
                                 p.flags & BQ_LF_W16);
      return;
    }
    const bool in_k = (bq_i64)kt * BQ_BK + cc * 16 < p.k; // (K is a multiple of 16 here)
    const bq_i64 k0 = (bq_i64)kt * BQ_BK;
    if (what & 1)
      bq_cp_async16(d + off, xrow && in_k ? (const void *)(xs + k0) : (const void *)ws, xrow && in_k ? 16 : 0);
    if (what & 2)
#pragma unroll
      for (int i = 0; i < BW / 16; i++)
        bq_cp_async16(d + BX * BQ_BK + off + i * 16 * BQ_BK,
                      in_k ? (const void *)(ws + i * 16 * p.k + k0) : (const void *)ws, in_k ? 16 : 0);
  };
  bq_col_q *cols = (bq_col_q *)(stages + S * STAGE + (BLK ? S * BQ_F8V_SCALES * 4 : 0));
  bq_row_q *rows = (bq_row_q *)((unsigned char *)cols + BQ_COLS_SMEM);
  bq_stage_cols<BW>(p, cols, n0, tid);
  // FP8 QuantizedLinear (BQ_LF_PDL): launched while the activations' kernel runs, the CTA
  // copies the first stages' weight rows, then waits for that kernel (bq_wait_prior_grid)
  // before anything it writes (x, its scales) is read. The weight copies join the first
  // commit group below, so each stage's group still holds all of the stage.
  const bool pdl = p.flags & BQ_LF_PDL;
  if (pdl) {
    if (fast)
#pragma unroll
      for (int s = 0; s < S - 1; s++)
        if (s < ktiles) load(s, s, 2);
    bq_wait_prior_grid();
  }
  bq_stage_rows(p, rows, m0, tid);

  float acc[8], part[8];
#pragma unroll
  for (int i = 0; i < 8; i++) acc[i] = 0.0f;
#pragma unroll
  for (int s = 0; s < S - 1; s++) {
    if (s < ktiles) load(s, s, pdl && fast ? 1 : 3);
    bq_cp_commit();
  }
  for (int kt = 0; kt < ktiles; kt++) {
    bq_cp_wait<S - 2>();
    bq_fence_proxy_async();
    __syncthreads(); // slice kt has landed; slice kt - 1's wgmma are done (waited below)
    if (kt + S - 1 < ktiles) load((kt + S - 1) % S, kt + S - 1, 3);
    bq_cp_commit();
    const bq_u32 sx = sbase + (kt % S) * STAGE, sw = sx + BX * BQ_BK;
    bq_wg_fence();
#pragma unroll
    for (int ks = 0; ks < BQ_BK / 32; ks++) bq_wgmma_f8_n16(part, bq_wg_desc(sw + ks * 32), bq_wg_desc(sx + ks * 32), ks);
    bq_wg_commit();
    if constexpr (BLK) {
      // the block's scales of the thread's rows of x (acc[i]'s: s[2 (i / 4) + i % 2])
      const float *bs = bscales + (kt % S) * BQ_F8V_SCALES;
      float sc[4];
#pragma unroll
      for (int q = 0; q < 4; q++) sc[q] = __fmul_rn(bs[8 * (q >> 1) + 2 * (lane & 3) + (q & 1)], bs[BX]);
      bq_wg_wait<0>();
#pragma unroll
      for (int i = 0; i < 8; i++) acc[i] = __fmaf_rn(part[i], sc[2 * (i >> 2) + (i & 1)], acc[i]);
    } else {
      bq_wg_wait<0>();
#pragma unroll
      for (int i = 0; i < 8; i++) acc[i] = __fadd_rn(acc[i], part[i]);
    }
  }
  bq_cp_wait<0>();
  __syncthreads(); // every copy is done; the staged columns and rows are visible

  // thread (w, lane) holds in acc[i] column (weight row) 16 w + lane / 4 + 8 ((i / 2) % 2) of
  // row (of x) 8 (i / 4) + 2 (lane % 4) + i % 2: through a [16][64 + 4] tile in the stages,
  // then a thread a column, rows in turn, each warp's stores 32 neighbouring outputs
  float *tile = (float *)stages;
#pragma unroll
  for (int i = 0; i < 8; i++)
    tile[(8 * (i / 4) + 2 * (lane & 3) + (i & 1)) * (BW + 4) + 16 * w + (lane >> 2) + 8 * ((i / 2) & 1)] = acc[i];
  __syncthreads();
  const int c = tid & (BW - 1);
  if (n0 + c < p.n)
#pragma unroll 1
    for (int xr = tid / BW; xr < BX && m0 + xr < p.m; xr += 128 / BW)
      ((bq_t *)p.y)[(m0 + xr) * p.ldy + n0 + c] = bq_epilogue(tile[xr * (BW + 4) + c], rows[xr], cols[c], p.flags);
}
#endif
#if BQ_E_FP8_GEMV
extern "C" __global__ void __launch_bounds__(128, 1) BQ_FN_FP8_GEMV(const bq_linear_params p) { bq_fp8_gemv_body<false>(p); }
#endif
#if BQ_E_FP8_GEMV_BLK
extern "C" __global__ void __launch_bounds__(128, 1) BQ_FN_FP8_GEMV_BLK(const bq_linear_params p) {
  bq_fp8_gemv_body<true>(p);
}
#endif
#else
#if BQ_E_GEMM_WGMMA
extern "C" __global__ void BQ_FN_GEMM_WGMMA(const bq_linear_params p) { __trap(); } // not an sm_90a module
#endif
#if BQ_E_FP8_WGMMA
extern "C" __global__ void BQ_FN_FP8_WGMMA(const bq_linear_params p) { __trap(); } // not an sm_90a module
#endif
#if BQ_E_FP8_GEMV
extern "C" __global__ void BQ_FN_FP8_GEMV(const bq_linear_params p) { __trap(); } // not an sm_90a module
#endif
#if BQ_E_FP8_WGMMA_BLK
extern "C" __global__ void BQ_FN_FP8_WGMMA_BLK(const bq_linear_params p) { __trap(); } // not an sm_90a module
#endif
#if BQ_E_FP8_GEMV_BLK
extern "C" __global__ void BQ_FN_FP8_GEMV_BLK(const bq_linear_params p) { __trap(); } // not an sm_90a module
#endif
#if BQ_E_FP8_TMA
extern "C" __global__ void BQ_FN_FP8_TMA(const __grid_constant__ bq_fp8_tma_params q) { __trap(); } // not an sm_90a module
#endif
#if BQ_E_FP8_TMA_BLK
extern "C" __global__ void BQ_FN_FP8_TMA_BLK(const __grid_constant__ bq_fp8_tma_params q) { __trap(); } // not an sm_90a module
#endif
#endif

#if BQ_OP != BQ_OP_FP8_LINEAR
// ---- M <= 64: weight streaming ----------------------------------------------------------------------
// A CTA owns 16 output columns (two n8 tiles) for MT m16 tiles of rows. The weight is read
// once, from memory, and sets the time; the activations (M x K bytes) are read by every CTA,
// from L2. K moves through shared memory in stages of 512 bytes: a stage holds the 16
// weight rows, then the xr = min(16 MT, M) activation rows that can exist, each row 512
// bytes at a stride of BQ_GV_LD. The copies (cp.async) take each row's 512 bytes with one
// warp instruction, so that the CTA reads its 16 weight rows (one contiguous block of
// memory) in long runs. Then the 8 warps split the stage in 64-byte slices: lane
// (g = lane / 4, q = lane % 4) reads 16 contiguous bytes of weight rows g and 8 + g and of
// activation rows g and 8 + g of each m16 tile, straight into mma fragments: the dot
// product is a sum over k, so the same permutation of k in both operands (lane quad q
// holds k = 16q .. 16q + 15, split over two m16n8k32 steps) leaves it unchanged. The row
// stride of 512 + 64 bytes keeps those reads free of bank conflicts. The warps meet in
// shared memory at the end. A grid row (blockIdx.y) takes the next 16 * MT rows; its
// weight reads then mostly hit L2.
// Stages in flight: as many as let four CTAs share an SM, so that the grid of a large
// weight runs in one wave: a partial second wave costs more than a shallower pipeline. The
// host sizes shared memory the same way (bq__gemv_smem). Deeper pipelines do not pay, nor
// do longer stages.
#define BQ_GV_LD 576
#define BQ_GV_STAGES(XR) max(2, min(4, 57344 / ((16 + (XR)) * BQ_GV_LD)))
#define BQ_GV_SMEM(XR) (BQ_GV_STAGES(XR) * (16 + (XR)) * BQ_GV_LD) // XR = min(16 MT, M)

// A weight-streaming CTA's shape and a thread's share of the copies into the stages.
template <int MT> struct bq_gemv_cta {
  enum : int { J = 2 + 2 * MT }; // the rows of a stage a thread copies (an enum: no storage)
  int lane, warp, g, q;
  bq_i64 n0, m0;
  const bq_u8 *A, *W;
  bool avec, wvec;
  int xr, rows, STAGE, S, ktiles;
  bq_u32 sbase;
  const bq_u8 *wsrc, *asrc;
  int ok; // bit j: row warp + 8 j exists
  int fast;

  // This thread copies bytes 16 lane .. of rows warp + 8 j of each stage (weight rows for
  // j < 2, then activation rows). Tiles wholly inside K, with 16-byte aligned operands,
  // take one cp.async a row and no bounds arithmetic; the K tail and unaligned operands
  // take bq_tile_chunk, in a loop kept rolled (its byte loads would cost registers).
  __device__ __forceinline__ bq_gemv_cta(const bq_linear_params &p, unsigned char *smem) {
    const int tid = threadIdx.x;
    lane = tid & 31;
    warp = tid >> 5;
    g = lane >> 2;
    q = lane & 3;
    n0 = (bq_i64)blockIdx.x * 16;
    m0 = (bq_i64)blockIdx.y * 16 * MT;
    A = (const bq_u8 *)p.a;
    W = (const bq_u8 *)p.w;
    avec = p.flags & BQ_LF_A16;
    wvec = p.flags & BQ_LF_W16;
    xr = (int)min((bq_i64)16 * MT, p.m);
    rows = 16 + xr;
    STAGE = rows * BQ_GV_LD;
    S = BQ_GV_STAGES(xr);
    ktiles = (int)((p.k + 511) / 512);
    sbase = bq_smem_addr(smem);
    wsrc = W + (n0 + warp) * p.k + lane * 16;
    asrc = A + (m0 + warp) * p.lda + lane * 16;
    ok = 0;
#pragma unroll
    for (int j = 0; j < J; j++) {
      const int r = warp + 8 * j;
      if (r < 16 ? n0 + r < p.n : r < rows && m0 + r - 16 < p.m) ok |= 1 << j;
    }
    fast = wvec && avec ? (int)(p.k / 512) : 0;
  }

  // rows j in [jlo, jhi) of a stage: j < 2 the weight's, then the activations'
  __device__ __forceinline__ void load(const bq_linear_params &p, int stage, int kt, int jlo, int jhi) const {
    const bq_u32 d = sbase + stage * STAGE + warp * BQ_GV_LD + lane * 16;
    if (kt < fast) {
#pragma unroll
      for (int j = 0; j < J; j++) {
        const bool has = ok >> j & 1;
        const bq_u8 *src = j < 2 ? wsrc + (8 * j * p.k + (bq_i64)kt * 512) : asrc + (8 * (j - 2) * p.lda + (bq_i64)kt * 512);
        if (j >= jlo && j < jhi && warp + 8 * j < rows)
          bq_cp_async16(d + j * 8 * BQ_GV_LD, has ? (const void *)src : (const void *)W, has ? 16 : 0);
      }
      return;
    }
    const bq_i64 k = (bq_i64)kt * 512 + lane * 16;
#pragma unroll 1
    for (int j = jlo; j < jhi; j++) {
      const int r = warp + 8 * j;
      if (r < 16) bq_tile_chunk(d + j * 8 * BQ_GV_LD, W, n0 + r < p.n, n0 + r, p.k, k, p.k, wvec);
      else if (r < rows) bq_tile_chunk(d + j * 8 * BQ_GV_LD, A, m0 + r - 16 < p.m, m0 + r - 16, p.lda, k, p.k, avec);
    }
  }
};

// A lane's share of one m16 tile's products with both n8 tiles: its fragments a0, a1 of
// the activation rows and w0, w1 of the weight rows, in m16n8k32 steps.
static __device__ __forceinline__ void bq_gemv_mma(int (&d0)[4], int (&d1)[4], const uint4 &a0, const uint4 &a1,
                                                   const uint4 &w0, const uint4 &w1) {
  bq_mma(d0, a0.x, a1.x, a0.y, a1.y, w0.x, w0.y);
  bq_mma(d0, a0.z, a1.z, a0.w, a1.w, w0.z, w0.w);
  bq_mma(d1, a0.x, a1.x, a0.y, a1.y, w1.x, w1.y);
  bq_mma(d1, a0.z, a1.z, a0.w, a1.w, w1.z, w1.w);
}

// The parameters of a finisher's rows m and m + 8 (zero past M)
static __device__ __forceinline__ void bq_gemv_rows(const bq_linear_params &p, bq_i64 m, bq_row_q (&rq)[2]) {
#pragma unroll
  for (int h = 0; h < 2; h++) rq[h] = m + h * 8 < p.m ? bq_row_of(p, m + h * 8) : bq_row_q{(bq_c)0, 0};
}

// The warps meet in shared memory: partial sums red[w][t][i][e][lane], 8 MT KiB (at
// least two stages of 17 rows hold it). The finishers sum them and store their outputs.
template <int MT>
static __device__ __forceinline__ void bq_gemv_finish(const bq_linear_params &p, const bq_gemv_cta<MT> &cta,
                                                      unsigned char *smem, const int (&acc)[2][MT][4], int et, int ei,
                                                      bq_i64 en, bool finisher, const bq_row_q (&rq)[2],
                                                      const bq_col_q &c0, const bq_col_q &c1) {
  const int warp = cta.warp, lane = cta.lane, g = cta.g;
  const bq_i64 m0 = cta.m0;
  int *red = (int *)smem;
#pragma unroll
  for (int t = 0; t < 2; t++)
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
      for (int e = 0; e < 4; e++) red[(((warp * 2 + t) * MT + i) * 4 + e) * 32 + lane] = acc[t][i][e];
  __syncthreads();
  if (!finisher) return;
  int s[4];
#pragma unroll
  for (int e = 0; e < 4; e++) {
    bq_u32 v = 0;
#pragma unroll
    for (int w = 0; w < 8; w++) v += (bq_u32)red[(((w * 2 + et) * MT + ei) * 4 + e) * 32 + lane];
    s[e] = (int)v;
  }
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const bq_i64 m = m0 + 16 * ei + g + h * 8;
    if (m < p.m)
      bq_store_pair(p, m, en, bq_epilogue(s[2 * h], rq[h], c0, p.flags), bq_epilogue(s[2 * h + 1], rq[h], c1, p.flags));
  }
}

template <int MT> static __device__ __forceinline__ void bq_gemv_body(const bq_linear_params &p, unsigned char *smem) {
  const bq_gemv_cta<MT> cta(p, smem);
  constexpr int J = bq_gemv_cta<MT>::J;
  const int warp = cta.warp, g = cta.g, q = cta.q, xr = cta.xr, STAGE = cta.STAGE, S = cta.S, ktiles = cta.ktiles;
  auto load = [&](int stage, int kt, int jlo, int jhi) { cta.load(p, stage, kt, jlo, jhi); };

  // The epilogue's parameters (warp t * MT + i finishes n8 tile t of m16 tile i), then the
  // first stages. Launched while the activations' kernel runs (BQ_LF_PDL: QuantizedLinear),
  // the first stages' weight rows come first, then the column parameters, and only after
  // that kernel has finished (bq_wait_prior_grid) the row parameters and the activation
  // rows; commit group 0 then holds the weight rows of every first stage, which only makes
  // them land sooner. (Without such a kernel to overlap, that order would slow the weight
  // streaming, so it is taken only then.)
  const bool pdl = p.flags & BQ_LF_PDL;
  if (pdl)
    for (int s = 0; s < S - 1; s++)
      if (s < ktiles) load(s, s, 0, 2);
  const int et = warp / MT, ei = warp % MT;
  const bq_i64 en = cta.n0 + et * 8 + q * 2;
  const bool finisher = warp < 2 * MT && en < p.n;
  bq_col_q c0, c1;
  bq_row_q rq[2];
  if (finisher) {
    c0 = bq_col_of(p, en);
    c1 = en + 1 < p.n ? bq_col_of(p, en + 1) : c0;
  }
  if (pdl) bq_wait_prior_grid();
  if (finisher) bq_gemv_rows(p, cta.m0 + 16 * ei + g, rq);
  for (int s = 0; s < S - 1; s++) {
    if (s < ktiles) load(s, s, pdl ? 2 : 0, J);
    bq_cp_commit();
  }

  int acc[2][MT][4];
  bq_zero(acc);
  for (int kt = 0, cur = 0, nxt = S - 1; kt < ktiles; kt++) { // cur = kt % S, nxt = (kt + S - 1) % S
    if (S == 2) bq_cp_wait<0>();
    else if (S == 3) bq_cp_wait<1>();
    else bq_cp_wait<2>();
    __syncthreads(); // tile kt has landed, and every warp is done with tile kt - 1
    if (kt + S - 1 < ktiles) load(nxt, kt + S - 1, 0, J);
    bq_cp_commit();
    const unsigned char *st = smem + cur * STAGE + warp * 64 + q * 16;
    cur = cur + 1 == S ? 0 : cur + 1;
    nxt = nxt + 1 == S ? 0 : nxt + 1;
    const uint4 w0 = *(const uint4 *)(st + g * BQ_GV_LD), w1 = *(const uint4 *)(st + (8 + g) * BQ_GV_LD);
    const uint4 z = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int t = 0; t < MT; t++) { // activation rows past xr are not in shared memory: zeros
      const int r0 = 16 * t + g, r1 = 16 * t + 8 + g;
      const uint4 a0 = r0 < xr ? *(const uint4 *)(st + (16 + r0) * BQ_GV_LD) : z;
      const uint4 a1 = r1 < xr ? *(const uint4 *)(st + (16 + r1) * BQ_GV_LD) : z;
      bq_gemv_mma(acc[0][t], acc[1][t], a0, a1, w0, w1);
    }
  }
  bq_cp_wait<0>(); // (only empty groups are left)
  __syncthreads(); // every warp is done with the stages: they take the partial sums

  bq_gemv_finish(p, cta, smem, acc, et, ei, en, finisher, rq, c0, c1);
}

// M <= 16, 32, 64: one, two or four m16 tiles; BQ_GV_SMEM(min(16 MT, M)) bytes of dynamic
// shared memory
#if BQ_E_GEMV
extern "C" __global__ void BQ_LB_GEMV BQ_FN_GEMV(const bq_linear_params p) {
  BQ_DYNAMIC_SMEM(smem);
  bq_gemv_body<1>(p, smem);
}
#endif
#if BQ_E_GEMV32
extern "C" __global__ void BQ_LB_GEMV32 BQ_FN_GEMV32(const bq_linear_params p) {
  BQ_DYNAMIC_SMEM(smem);
  bq_gemv_body<2>(p, smem);
}
#endif
#if BQ_E_GEMV64
extern "C" __global__ void BQ_LB_GEMV64 BQ_FN_GEMV64(const bq_linear_params p) {
  BQ_DYNAMIC_SMEM(smem);
  bq_gemv_body<4>(p, smem);
}
#endif
#endif

#else
// ---- weight row sums: wsum[n] = sum_k w[n, k], for asymmetric activations --------------------
// A warp per row; 16-byte loads summed with dp4a against ones.
#if BQ_E_WEIGHT_SUMS
extern "C" __global__ void BQ_LB_WEIGHT_SUMS BQ_FN_WEIGHT_SUMS(const bq_linear_params p) {
  const int lane = threadIdx.x & 31;
  const bq_i64 n = (bq_i64)blockIdx.x * 8 + (threadIdx.x >> 5);
  if (n >= p.n) return;
  const bool wvec = p.flags & BQ_LF_W16;
  int s = 0;
  for (bq_i64 k = (bq_i64)lane * 16; k < p.k; k += 32 * 16) {
    uint4 v = bq_load16((const bq_u8 *)p.w, true, n, p.k, k, p.k, wvec);
    s = __dp4a((int)v.x, 0x01010101, s);
    s = __dp4a((int)v.y, 0x01010101, s);
    s = __dp4a((int)v.z, 0x01010101, s);
    s = __dp4a((int)v.w, 0x01010101, s);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) ((int *)p.w_sums)[n] = s;
}
#endif
#endif
