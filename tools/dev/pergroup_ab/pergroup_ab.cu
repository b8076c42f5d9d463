// Per-group quantize bf16 -> s8 (group 128, no zero point): micro-kernels one feature apart,
// for tools/dev/pergroup_ab/pergroup_ab.py's in-process A/B against the library's bq_affine_pair
// and torch.compile's kernel. k_ours replicates bq_affine_pair's hot path; k_tri does what
// torch.compile's kernel does (approximate division); k_co* take warp-contiguous loads.
// k_ours_b* launch k_ours's body in blocks of another size. k_quad takes four accesses a thread
// and k_tl gives each thread half of two groups 4 KiB apart; both keep k_ours's loads, exact
// quotient and priority reset but drop its plain-scale test, clamp and magic-number group index.
// Not a quantizer for any other shape: group 128 and whole 16-element pieces are assumed (k_tl:
// whole blocks of 4096 elements; the launcher skips it otherwise).

typedef unsigned long long u64;
typedef unsigned u32;
enum {
  F_POLICY = 1,   // data loads with an L2 evict_last policy (else plain ld.global.v4)
  F_L1EL = 2,     // ... and L1::evict_last
  F_SCALE_L1 = 4, // scale via ld.global.L1::evict_last + L2 evict_last policy (else __ldg)
  F_EXACT = 8,    // Markstein's exact quotient (else div.full.f32 as Triton)
  F_PLAIN = 16,   // plain-scale test with an exact general path behind it
  F_CLAMP = 32,   // min(t, np-1), loads first, return before the store (else early return)
  F_APPLY = 64,   // applypriority evict_normal on each line after its store
  F_FDIV = 128,   // group index by a magic/shift from the parameters (else e >> 7)
  F_SPLIT = 256,  // the plain path stores and returns by itself (no jump over the general path)
};
struct Big { const void *x; const float *s; void *y; u32 np, magic, shift, pad[50]; };

template <int F> __device__ __forceinline__ void load16(uint4 &v, const void *p) {
  if (F & F_POLICY) {
    u64 pol;
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
    if (F & F_L1EL)
      asm volatile("ld.global.L1::evict_last.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(pol));
    else
      asm volatile("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(pol));
  } else {
    asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  }
}
template <int F> __device__ __forceinline__ float loads(const float *p) {
  if (F & F_SCALE_L1) {
    u64 pol;
    float r;
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
    asm volatile("ld.global.L1::evict_last.L2::cache_hint.f32 %0, [%1], %2;" : "=f"(r) : "l"(p), "l"(pol));
    return r;
  }
  return __ldg(p);
}
__device__ __forceinline__ float lo(u32 w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi(u32 w) { return __uint_as_float(w & 0xffff0000u); }
__device__ __forceinline__ u32 pack4(int e0, int e1, int e2, int e3) {
  u32 h, w;
  asm("cvt.pack.sat.s8.s32.b32 %0, %1, %2, 0;" : "=r"(h) : "r"(e3), "r"(e2));
  asm("cvt.pack.sat.s8.s32.b32 %0, %1, %2, %3;" : "=r"(w) : "r"(e1), "r"(e0), "r"(h));
  return w;
}
template <int F> __device__ __forceinline__ int qexact(float x, float s, float rcp) {
  const float q0 = x * rcp;
  const float q1 = fmaf(fmaf(-q0, s, x), rcp, q0);
  const float q = fabsf(q0) < 0x1p100f ? q1 : q0;
  int r;
  asm("cvt.rni.s16.f32 %0, %1;" : "=r"(r) : "f"(q));
  return r;
}
__device__ __forceinline__ int qapprox(float x, float s) {
  float q = rintf(__fdividef(x, s));
  q = fminf(fmaxf(q, -128.f), 127.f);
  return (int)q;
}
// the general path: the scale bracketed by a power of two, then the same correction
__device__ __forceinline__ int qslow(float x, float ss, float m, float rcp, bool corr) {
  const float xs = x * m, q0 = xs * rcp;
  const float q1 = fmaf(fmaf(-q0, ss, xs), rcp, q0);
  const float q = corr && fabsf(q0) < 0x1p100f ? q1 : q0;
  int r;
  asm("cvt.rni.s16.f32 %0, %1;" : "=r"(r) : "f"(q));
  return r;
}
__device__ __forceinline__ u32 pack16x4(const int (&q)[16], int o) {
  return pack4(q[o], q[o + 1], q[o + 2], q[o + 3]);
}
__device__ __forceinline__ uint4 pack16(const int (&q)[16]) {
  return make_uint4(pack16x4(q, 0), pack16x4(q, 4), pack16x4(q, 8), pack16x4(q, 12));
}
// 16 elements from two 16-byte words under one scale, exact quotient (a plain scale)
__device__ __forceinline__ void q16(const uint4 &v0, const uint4 &v1, float s, int (&q)[16]) {
  const float rcp = __frcp_rn(s);
  const u32 w[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
#pragma unroll
  for (int j = 0; j < 8; j++) q[2 * j] = qexact<0>(lo(w[j]), s, rcp), q[2 * j + 1] = qexact<0>(hi(w[j]), s, rcp);
}
// the input's 128-byte line back to normal priority, by the access that starts it (or first)
__device__ __forceinline__ void release(const char *xb, bool first) {
  if ((((u64)xb) & 127) == 0 || first) asm volatile("applypriority.global.L2::evict_normal [%0], 128;" ::"l"((u64)xb & ~127ull) : "memory");
}
template <int F> __device__ __forceinline__ void finish(const int (&q)[16], u32 t, u32 np, u32 a, u32 e, const char *xb, void *yv) {
  if ((F & F_CLAMP) && t >= np) return;
  *(uint4 *)((char *)yv + e) = pack16(q);
  if (F & F_APPLY) release(xb, a == 0);
}
template <int F> __device__ __forceinline__ void body(const void *xv, const float *sv, void *yv, u32 np, u32 magic, u32 shift) {
  const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
  u32 a = t;
  if (F & F_CLAMP) a = min(t, np - 1);
  else if (t >= np) return;
  const u32 e = a * 16;
  const char *xb = (const char *)xv + (u64)e * 2;
  uint4 v0, v1;
  load16<F>(v0, xb);
  load16<F>(v1, xb + 16);
  const u32 g = (F & F_FDIV) ? (__umulhi(e, magic) + e) >> shift : e >> 7;
  const float s = loads<F>(sv + g);
  const u32 w[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
  int q[16];
  bool slow = false;
  if (F & F_PLAIN) {
    const float as = fabsf(s);
    slow = !(as >= 0x1p-100f && as <= 0x1p100f);
  }
  if (!slow) {
    if (F & F_EXACT) {
      q16(v0, v1, s, q);
    } else {
#pragma unroll
      for (int j = 0; j < 8; j++) q[2 * j] = qapprox(lo(w[j]), s), q[2 * j + 1] = qapprox(hi(w[j]), s);
    }
    if (F & F_SPLIT) {
      finish<F>(q, t, np, a, e, xb, yv);
      return;
    }
  } else {
    const float as = fabsf(s);
    const float m = as < 0x1p-100f ? 0x1p64f : (as > 0x1p100f && as <= 0x1.fffffep127f ? 0x1p-64f : 1.f);
    const float ss = s * m, rcp = __frcp_rn(ss);
    const bool corr = as > 0.f && as <= 0x1.fffffep127f;
#pragma unroll
    for (int j = 0; j < 8; j++) q[2 * j] = qslow(lo(w[j]), ss, m, rcp, corr), q[2 * j + 1] = qslow(hi(w[j]), ss, m, rcp, corr);
  }
  finish<F>(q, t, np, a, e, xb, yv);
}
#define K(name, F)                                                                                              \
  extern "C" __global__ void __launch_bounds__(256) name(const void *x, const float *s, void *y, u32 np, u32 m, u32 sh) { \
    body<F>(x, s, y, np, m, sh);                                                                                 \
  }
#define OURS (F_POLICY | F_EXACT | F_PLAIN | F_CLAMP | F_APPLY | F_FDIV)
K(k_tri, F_POLICY | F_L1EL | F_SCALE_L1)
K(k_tri_exact, F_POLICY | F_L1EL | F_SCALE_L1 | F_EXACT)
K(k_ours, OURS)
K(k_ours_noapply, OURS & ~F_APPLY)
K(k_ours_approx, OURS & ~F_EXACT)
K(k_ours_noplain, OURS & ~F_PLAIN)
K(k_ours_noclamp, OURS & ~F_CLAMP)
K(k_ours_nofdiv, OURS & ~F_FDIV)
K(k_ours_l1el, OURS | F_L1EL)
K(k_ours_scalel1, OURS | F_SCALE_L1)
K(k_ours_nopolicy, OURS & ~F_POLICY)
K(k_ours_split, OURS | F_SPLIT)
#define NC (OURS & ~F_CLAMP)
K(k_nc_l1el, NC | F_L1EL)
K(k_nc_scalel1, NC | F_SCALE_L1)
K(k_nc_both, NC | F_L1EL | F_SCALE_L1)
K(k_nc_noapply, NC & ~F_APPLY)
K(k_nc_split, NC | F_SPLIT)
K(k_nc_both_noapply, (NC | F_L1EL | F_SCALE_L1) & ~F_APPLY)
K(k_tri_plain, F_POLICY | F_L1EL | F_SCALE_L1 | F_PLAIN)
K(k_tri_plain_split, F_POLICY | F_L1EL | F_SCALE_L1 | F_PLAIN | F_SPLIT)
extern "C" __global__ void __launch_bounds__(256) k_ours_big(const Big p) { body<OURS>(p.x, p.s, p.y, p.np, p.magic, p.shift); }

// Coalesced: a warp's two loads each cover 512 contiguous bytes; a thread takes 8 elements
// at wb + 8 lane and 8 at wb + 256 + 8 lane (two groups, two scales), two 8-byte stores.
template <int F> __device__ __forceinline__ void body_co(const void *xv, const float *sv, void *yv, u32 np) {
  const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= np) return;
  const u32 l = t & 31, wb = (t - l) * 16;
  const u32 e0 = wb + 8 * l, e1 = e0 + 256;
  const char *x0 = (const char *)xv + (u64)e0 * 2, *x1 = (const char *)xv + (u64)e1 * 2;
  uint4 v0, v1;
  load16<F>(v0, x0);
  load16<F>(v1, x1);
  const float s0 = loads<F>(sv + (e0 >> 7)), s1 = loads<F>(sv + (e1 >> 7));
  const float a0 = fabsf(s0), a1 = fabsf(s1);
  const bool plain = a0 >= 0x1p-100f && a0 <= 0x1p100f && a1 >= 0x1p-100f && a1 <= 0x1p100f;
  const u32 w0[4] = {v0.x, v0.y, v0.z, v0.w}, w1[4] = {v1.x, v1.y, v1.z, v1.w};
  int q[16];
  if (plain) {
    const float r0 = __frcp_rn(s0), r1 = __frcp_rn(s1);
#pragma unroll
    for (int j = 0; j < 4; j++) {
      q[2 * j] = qexact<F>(lo(w0[j]), s0, r0), q[2 * j + 1] = qexact<F>(hi(w0[j]), s0, r0);
      q[8 + 2 * j] = qexact<F>(lo(w1[j]), s1, r1), q[8 + 2 * j + 1] = qexact<F>(hi(w1[j]), s1, r1);
    }
  } else {
    float ss[2], m[2], rc[2];
    bool corr[2];
    const float sv2[2] = {s0, s1};
#pragma unroll
    for (int k = 0; k < 2; k++) {
      const float as = fabsf(sv2[k]);
      m[k] = as < 0x1p-100f ? 0x1p64f : (as > 0x1p100f && as <= 0x1.fffffep127f ? 0x1p-64f : 1.f);
      ss[k] = sv2[k] * m[k], rc[k] = __frcp_rn(ss[k]);
      corr[k] = as > 0.f && as <= 0x1.fffffep127f;
    }
#pragma unroll
    for (int j = 0; j < 4; j++) {
      q[2 * j] = qslow(lo(w0[j]), ss[0], m[0], rc[0], corr[0]), q[2 * j + 1] = qslow(hi(w0[j]), ss[0], m[0], rc[0], corr[0]);
      q[8 + 2 * j] = qslow(lo(w1[j]), ss[1], m[1], rc[1], corr[1]), q[9 + 2 * j] = qslow(hi(w1[j]), ss[1], m[1], rc[1], corr[1]);
    }
  }
  *(uint2 *)((char *)yv + e0) = make_uint2(pack4(q[0], q[1], q[2], q[3]), pack4(q[4], q[5], q[6], q[7]));
  *(uint2 *)((char *)yv + e1) = make_uint2(pack4(q[8], q[9], q[10], q[11]), pack4(q[12], q[13], q[14], q[15]));
  if (F & F_APPLY) {
    if ((l & 7) == 0) {
      asm volatile("applypriority.global.L2::evict_normal [%0], 128;" ::"l"(x0) : "memory");
      asm volatile("applypriority.global.L2::evict_normal [%0], 128;" ::"l"(x1) : "memory");
    }
  }
}
#define KC(name, F)                                                                                              \
  extern "C" __global__ void __launch_bounds__(256) name(const void *x, const float *s, void *y, u32 np, u32 m, u32 sh) { \
    body_co<F>(x, s, y, np);                                                                                     \
  }
KC(k_co, F_POLICY | F_APPLY)
KC(k_co_noapply, F_POLICY)
KC(k_co_nopol, 0)
KC(k_co_l1el, F_POLICY | F_L1EL | F_SCALE_L1 | F_APPLY)

// k_ours in blocks of 128, 512 and 1024 threads (the launcher sizes the grid to match)
#define KB(name, F, T)                                                                                          \
  extern "C" __global__ void __launch_bounds__(T) name(const void *x, const float *s, void *y, u32 np, u32 m, u32 sh) { \
    body<F>(x, s, y, np, m, sh);                                                                                 \
  }
KB(k_ours_b128, OURS, 128)
KB(k_ours_b512, OURS, 512)
KB(k_ours_b1024, OURS, 1024)

// four accesses a thread: 32 elements (64 bytes), one scale; np counts 32-element pieces
extern "C" __global__ void __launch_bounds__(256) k_quad(const void *xv, const float *sv, void *yv, u32 np, u32 m, u32 sh) {
  const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= np) return;
  const u32 e = t * 32;
  const char *xb = (const char *)xv + (u64)e * 2;
  uint4 v[4];
#pragma unroll
  for (int i = 0; i < 4; i++) load16<F_POLICY>(v[i], xb + 16 * i);
  const float s = __ldg(sv + (e >> 7));
  int q0[16], q1[16];
  q16(v[0], v[1], s, q0);
  q16(v[2], v[3], s, q1);
  *(uint4 *)((char *)yv + e) = pack16(q0);
  *(uint4 *)((char *)yv + e + 16) = pack16(q1);
  release(xb, t == 0);
}
// A block takes 32 groups of 128; lane l of warp w takes 8 elements at column 8 (l % 16) of
// groups 2 w + l / 16 and 16 more, so each of a warp's two loads covers 512 contiguous bytes
// and they lie 4 KiB apart (torch.compile's kernel instead gives a thread 16 contiguous
// elements, as k_ours does); np is not read (the launcher gives whole blocks only)
extern "C" __global__ void __launch_bounds__(256) k_tl(const void *xv, const float *sv, void *yv, u32 np, u32 m, u32 sh) {
  const u32 w = threadIdx.x >> 5, l = threadIdx.x & 31;
  const u32 g0 = blockIdx.x * 32 + 2 * w + (l >> 4), g1 = g0 + 16;
  const u32 e0 = g0 * 128 + 8 * (l & 15), e1 = g1 * 128 + 8 * (l & 15);
  const char *x0 = (const char *)xv + (u64)e0 * 2, *x1 = (const char *)xv + (u64)e1 * 2;
  uint4 v0, v1;
  load16<F_POLICY>(v0, x0);
  load16<F_POLICY>(v1, x1);
  const float s0 = __ldg(sv + g0), s1 = __ldg(sv + g1);
  const float r0 = __frcp_rn(s0), r1 = __frcp_rn(s1);
  const u32 a[4] = {v0.x, v0.y, v0.z, v0.w}, b[4] = {v1.x, v1.y, v1.z, v1.w};
  int q[16];
#pragma unroll
  for (int j = 0; j < 4; j++) {
    q[2 * j] = qexact<0>(lo(a[j]), s0, r0), q[2 * j + 1] = qexact<0>(hi(a[j]), s0, r0);
    q[8 + 2 * j] = qexact<0>(lo(b[j]), s1, r1), q[9 + 2 * j] = qexact<0>(hi(b[j]), s1, r1);
  }
  *(uint2 *)((char *)yv + e0) = make_uint2(pack16x4(q, 0), pack16x4(q, 4));
  *(uint2 *)((char *)yv + e1) = make_uint2(pack16x4(q, 8), pack16x4(q, 12));
  if ((l & 7) == 0) {
    release(x0, false);
    release(x1, false);
  }
}
