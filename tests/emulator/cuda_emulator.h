/* tests/emulator/cuda_emulator.h - runs kernels_src/ code on the CPU, for host tests.

   Not a GPU and not a timing model: a functional model of the few CUDA features the
   linear kernels use, so that CI (which has no GPU) executes the very source NVRTC
   compiles, index arithmetic, tiling, tails and epilogue included:
   - a CTA's threads are user-level fibers, run one at a time until they block at a
     barrier; __syncthreads and warp collectives are real barriers. On x86-64 a fiber
     switch saves the callee-saved registers and the stack pointer (emu_switch);
     elsewhere, or with EMU_UCONTEXT, ucontext's swapcontext, whose signal-mask system
     calls made it most of the linear suites' time;
   - mma.sync m16n8k32 (s8/u8 x s8 -> s32, and FP8 -> f32 under a model: see bq_mma), ldmatrix .x4, __shfl_xor_sync, __all_sync, __ballot_sync and __dp4a
     follow the register layouts of the PTX ISA; a shuffle or vote waits for the running
     lanes of its mask only (lanes outside it may be elsewhere, as on a GPU);
   - cp.async copies are queued per thread and land only at cp.async.wait_group (zero
     filling past src-size), so a kernel that reads a stage before waiting for it reads
     stale bytes and fails its test; with emu.eager_copies they land at issue instead,
     which exposes a stage refilled while an asynchronous reader (wgmma) still reads it;
   - wgmma (sm_90a) reads its operands through shared-memory descriptors with the 128-byte
     swizzle, and runs at wgmma.wait_group;
   - mbarriers count arrivals and bytes and flip their phase's parity; a thread waiting on
     one runs no further until that phase completes. The tensor memory accelerator's 2-D
     copies (cp.async.bulk.tensor) land at issue, swizzled by address as the hardware does,
     zero past the tensor's edges, and count their bytes on their mbarrier; their tensor
     maps are the emulator's own encoding (emu_tensor_map, which the tests install as
     cuTensorMapEncodeTiled);
   - shared memory is one buffer per CTA, filled with garbage at the start and bounded by
     the launch's dynamic size: a primitive's access past it aborts, and so does a block
     that leaves a byte past it changed; "device" pointers are host pointers.
   The PTX conversions of common.cuh use the CPU reference's (tests/reference.h).
   Include it, then, in a namespace per specialization, define the kernel's prelude
   macros and include common.cuh and the kernel file; emulator/kernel_undefs.h clears the
   kernels' macros before the next specialization. */
#ifndef BQ_CUDA_EMULATOR_H
#define BQ_CUDA_EMULATOR_H
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <vector>

#define BQ_EMULATED 1
#define __device__
#define __global__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __shared__ static
#define __restrict__
#define __grid_constant__

struct uint4 { unsigned x, y, z, w; };
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
struct uint2 { unsigned x, y; };
struct alignas(8) float2 { float x, y; };
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
struct alignas(16) float4 { float x, y, z, w; };
struct emu_dim3 { unsigned x, y, z; };

/* ---- the fiber runtime ------------------------------------------------------------------ */
struct emu_copy { unsigned dst; const unsigned char *src; int bytes, size; }; /* size: the copy's 16 or 4 bytes */
struct emu_wgmma { int *d; unsigned long long da, db; float *df; int acc, nd, b_acts; }; /* df: FP8's f32 D, nd of
                                                                                         them; b_acts: B holds x */
struct emu_mbar { unsigned addr; int count, pending; long long tx; unsigned phase; }; /* phase: completed ones */
/* ---- fibers ------------------------------------------------------------------------------------ */
#if defined(__x86_64__) && !defined(EMU_UCONTEXT)
#define EMU_FAST_SWITCH 1
/* emu_switch(&from, to): pushes the SysV callee-saved registers (and the x87 and SSE control
   words) on the current stack, stores the stack pointer in *from, loads to and pops the same */
extern "C" void emu_switch(void **from, void *to);
__asm__(".text\n"
        ".globl emu_switch\n"
        ".hidden emu_switch\n"
        ".type emu_switch, @function\n"
        "emu_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  subq $16, %rsp\n  stmxcsr 8(%rsp)\n  fnstcw (%rsp)\n"
        "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
        "  ldmxcsr 8(%rsp)\n  fldcw (%rsp)\n  addq $16, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size emu_switch, .-emu_switch\n");
typedef void *emu_ctx; /* a suspended fiber's stack pointer */
#else
typedef ucontext_t emu_ctx;
#endif

struct emu_thread {
  emu_ctx ctx;
  emu_dim3 tid;
  int done;
  std::vector<emu_copy> open;                 /* cp.async since the last commit */
  std::vector<std::vector<emu_copy>> groups;  /* committed, oldest first */
  std::vector<emu_wgmma> wg_open;             /* wgmma since the last commit */
  std::vector<std::vector<emu_wgmma>> wg_groups;
  unsigned char *stack;
};

#define EMU_MAX_THREADS 1024
#define EMU_SMEM_BYTES (228 * 1024)
static struct {
  emu_thread th[EMU_MAX_THREADS];
  int nthreads, live;
  unsigned warp_live[32]; /* per warp, its lanes still running */
  emu_thread *cur;
  emu_ctx sched;
  unsigned bar_gen;
  unsigned long long progress; /* barrier arrivals and exits: a pass without any is a deadlock */
  int eager_copies;            /* 1: cp.async lands at issue instead of at its wait */
  int bar_count;
  /* per warp, the collectives open now, one per mask (several may be open at once: a
     rotation's blocks of a few lanes each, while the warp's other lanes wait in a full-mask
     shuffle for them): the mask, its arrivals, its generation */
  unsigned wmask[32][32], wgen[32][32];
  int wcount[32][32];
  emu_dim3 block_idx, block_dim, grid_dim;
  alignas(128) unsigned char smem[EMU_SMEM_BYTES]; /* the dynamic shared memory */
  unsigned smem_bytes;                              /* how much of it the launch asked for */
  unsigned char slot[32][32][64]; /* per warp, per lane: a collective's inputs */
  void (*kernel)(const void *);
  const void *params;
  emu_mbar mbar[64]; /* the block's mbarriers, by address */
  int nmbar;
} emu;

#define threadIdx (emu.cur->tid)
#define blockIdx (emu.block_idx)
#define blockDim (emu.block_dim)
#define gridDim (emu.grid_dim)

#ifdef EMU_FAST_SWITCH
static inline void emu_to_sched() { emu_switch(&emu.cur->ctx, emu.sched); }
static inline void emu_to_thread(emu_thread *th) { emu_switch(&emu.sched, th->ctx); }
#else
static inline void emu_to_sched() { swapcontext(&emu.cur->ctx, &emu.sched); }
static inline void emu_to_thread(emu_thread *th) { swapcontext(&emu.sched, &th->ctx); }
#endif
static inline void emu_yield() { emu_to_sched(); }
static inline int emu_index() { return (int)(emu.cur - emu.th); }

/* A warp collective with mask m completes when every lane of m still running has arrived:
   checked for the collective a lane arrives at, and for all of a warp's when a lane exits */
static void emu_release_warp_entry(int w, int k) {
  if (emu.wcount[w][k] > 0 && emu.wcount[w][k] == __builtin_popcount(emu.wmask[w][k] & emu.warp_live[w])) {
    emu.wcount[w][k] = 0;
    emu.wgen[w][k]++;
  }
}
static void emu_release_barriers() {
  if (emu.bar_count > 0 && emu.bar_count == emu.live) { emu.bar_count = 0; emu.bar_gen++; }
}

static inline void __syncthreads() {
  unsigned g = emu.bar_gen;
  emu.bar_count++;
  emu.progress++;
  emu_release_barriers();
  while (emu.bar_gen == g) emu_yield();
}
static inline void emu_warp_sync(unsigned mask = 0xffffffffu) {
  const int w = emu_index() >> 5;
  if (!(mask >> (emu_index() & 31) & 1u)) {
    fprintf(stderr, "emu: thread %d takes part in a warp collective whose mask (0x%08x) leaves it out\n", emu_index(), mask);
    abort();
  }
  int k = 0, free_k = -1;
  for (; k < 32; k++) {
    if (emu.wcount[w][k] > 0 && emu.wmask[w][k] == mask) break;
    if (emu.wcount[w][k] == 0 && free_k < 0) free_k = k;
  }
  if (k == 32) k = free_k, emu.wmask[w][k] = mask;
  const unsigned g = emu.wgen[w][k];
  emu.wcount[w][k]++;
  emu.progress++;
  emu_release_warp_entry(w, k);
  while (emu.wgen[w][k] == g) emu_yield();
}
static inline void __syncwarp(unsigned mask = 0xffffffffu) { emu_warp_sync(mask); }
static inline unsigned char *emu_slot(int lane) { return emu.slot[emu_index() >> 5][lane]; }
static inline int emu_lane() { return emu_index() & 31; }

static void emu_entry() {
  emu.kernel(emu.params);
  emu.cur->done = 1;
  emu.progress++;
  emu.live--;
  emu.warp_live[emu_index() >> 5] &= ~(1u << (emu_index() & 31));
  emu_release_barriers();
  for (int k = 0; k < 32; k++) emu_release_warp_entry(emu_index() >> 5, k);
  emu_to_sched(); /* never resumed */
  abort();
}

/* a fresh fiber on th's stack that starts in emu_entry */
static void emu_fiber_init(emu_thread *th, size_t stack_bytes) {
#ifdef EMU_FAST_SWITCH
  /* emu_switch's frame, as it pops it: the control words (16 bytes), six registers, then
     the return address, emu_entry, entered with the stack 8 bytes past a 16-byte boundary */
  uintptr_t top = ((uintptr_t)th->stack + stack_bytes) & ~(uintptr_t)15;
  void **sp = (void **)(top - 8); /* emu_entry's own return slot (never used) */
  *--sp = (void *)emu_entry;
  for (int r = 0; r < 6; r++) *--sp = NULL;
  sp -= 2;
  unsigned mxcsr;
  unsigned short fcw;
  __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
  __asm__ volatile("fnstcw %0" : "=m"(fcw));
  memset(sp, 0, 16);
  memcpy((char *)sp + 8, &mxcsr, 4);
  memcpy(sp, &fcw, 2);
  th->ctx = sp;
#else
  getcontext(&th->ctx);
  th->ctx.uc_stack.ss_sp = th->stack;
  th->ctx.uc_stack.ss_size = stack_bytes;
  th->ctx.uc_link = &emu.sched;
  makecontext(&th->ctx, emu_entry, 0);
#endif
}

/* Runs kernel(params) over the grid (gx x gy blocks of `block` threads, `smem` bytes of
   dynamic shared memory), one block after another. Shared memory past `smem` must stay
   untouched: the primitives check their addresses, and plain stores are caught by the
   garbage that must still be there when the block ends. */
static void emu_launch(void (*kernel)(const void *), const void *params, unsigned gx, unsigned gy, unsigned block,
                       unsigned smem) {
  enum { STACK = 128 * 1024 };
  if (block > EMU_MAX_THREADS || block % 32) { fprintf(stderr, "emu: bad block size %u\n", block); abort(); }
  emu.kernel = kernel;
  emu.params = params;
  emu.grid_dim = emu_dim3{gx, gy, 1};
  emu.block_dim = emu_dim3{block, 1, 1};
  emu.smem_bytes = smem;
  for (unsigned b = 0; b < gx * gy; b++) {
    emu.block_idx = emu_dim3{b % gx, b / gx, 0};
    memset(emu.smem, 0xEE, sizeof emu.smem); /* stale garbage, never zeros */
    emu.nthreads = emu.live = (int)block;
    emu.bar_count = 0;
    emu.nmbar = 0;
    for (int w = 0; w < 32; w++) {
      emu.warp_live[w] = w < (int)block / 32 ? 0xffffffffu : 0u;
      for (int k = 0; k < 32; k++) emu.wcount[w][k] = 0;
    }
    for (unsigned t = 0; t < block; t++) {
      emu_thread *th = &emu.th[t];
      th->tid = emu_dim3{t, 0, 0};
      th->done = 0;
      th->open.clear();
      th->groups.clear();
      th->wg_open.clear();
      th->wg_groups.clear();
      if (!th->stack) th->stack = (unsigned char *)malloc(STACK);
      emu_fiber_init(th, STACK);
    }
    for (int live = 1; live;) {
      unsigned long long before = emu.progress;
      live = 0;
      for (unsigned t = 0; t < block; t++) {
        emu_thread *th = &emu.th[t];
        if (th->done) continue;
        emu.cur = th;
        emu_to_thread(th);
        live |= !th->done;
      }
      if (live && emu.progress == before) {
        /* every live thread waits at a barrier that cannot complete: a __syncthreads or a
           warp collective (mma, ldmatrix, shuffle) that not all of its threads reach */
        fprintf(stderr, "emu: deadlock in block %u: a barrier or warp collective is divergent\n", b);
        abort();
      }
    }
    for (size_t i = smem; i < sizeof emu.smem; i++)
      if (emu.smem[i] != 0xEE) {
        fprintf(stderr, "emu: block %u wrote shared memory byte %zu, past the %u bytes of its launch\n", b, i, smem);
        abort();
      }
  }
}

/* ---- intrinsics ------------------------------------------------------------------------------ */
/* A GPU faults on a vector access off its size's boundary, where the host would not notice:
   the streaming accesses (16 bytes, and 8 where a kernel streams them) and __ldg check it. */
static inline void emu_check_aligned(const void *p, size_t n, const char *what) {
  if ((uintptr_t)p % n) {
    fprintf(stderr, "emu: %s of %zu bytes at %p, off a %zu-byte boundary\n", what, n, p, n);
    abort();
  }
}
template <typename T> static inline T __ldcs(const T *p) {
  emu_check_aligned(p, sizeof(T), "ld.cs");
  return *p;
}
template <typename T> static inline T __ldg(const T *p) {
  emu_check_aligned(p, sizeof(T), "ld.global.nc");
  return *p;
}
template <typename T> static inline void __stcs(T *p, T v) {
  emu_check_aligned(p, sizeof(T), "st.cs");
  *p = v;
}
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
static inline double __longlong_as_double(long long i) { double d; memcpy(&d, &i, 8); return d; }
static inline long long __double_as_longlong(double d) { long long i; memcpy(&i, &d, 8); return i; }
/* IEEE square roots, rounded to nearest even (sqrt is correctly rounded in C) */
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline double __dsqrt_rn(double a) { return sqrt(a); }
static inline float __int2float_rn(int v) { return (float)v; }
static inline double __int2double_rn(int v) { return (double)v; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz((unsigned)v); }
static inline int __ffs(int v) { return v == 0 ? 0 : __builtin_ctz((unsigned)v) + 1; }
static inline void __threadfence() {} /* one CTA runs at a time */
/* atomics: a thread runs until it reaches a barrier, so a read-modify-write is whole */
static inline unsigned atomicMax(unsigned *p, unsigned v) {
  const unsigned old = *p;
  if (v > old) *p = v;
  return old;
}
static inline unsigned atomicAdd(unsigned *p, unsigned v) {
  const unsigned old = *p;
  *p = old + v;
  return old;
}
static inline float __frcp_rn(float a) { return 1.0f / a; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline int __double2hiint(double d) {
  uint64_t b;
  memcpy(&b, &d, 8);
  return (int)(uint32_t)(b >> 32);
}
static inline int __double2loint(double d) {
  uint64_t b;
  memcpy(&b, &d, 8);
  return (int)(uint32_t)b;
}
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
static inline double __drcp_rn(double a) { return 1.0 / a; }
/* float to integer as the H100 converts: saturating (C leaves it undefined); a NaN float
   gives 0, a NaN double INT_MIN (seen on the GPU; an emulator that said 0 hid a bug) */
static inline long long emu_sat_ll(double r) {
  if (r != r) return 0;
  if (r >= 0x1p63) return LLONG_MAX;
  if (r < -0x1p63) return LLONG_MIN;
  return (long long)r;
}
static inline int emu_sat_int(double r) {
  if (r != r) return 0;
  if (r >= 0x1p31) return INT_MAX;
  if (r < -0x1p31) return INT_MIN;
  return (int)r;
}
static inline long long __float2ll_rn(float v) { return emu_sat_ll(rint((double)v)); }
static inline int __float2int_rn(float v) { return emu_sat_int(rint((double)v)); }
static inline int __float2int_rz(float v) { return emu_sat_int(trunc((double)v)); }
static inline long long __double2ll_rn(double v) { return v != v ? LLONG_MIN : emu_sat_ll(rint(v)); }
static inline int __double2int_rn(double v) { return v != v ? INT_MIN : emu_sat_int(rint(v)); }
static inline int __double2int_rz(double v) { return v != v ? INT_MIN : emu_sat_int(trunc(v)); }
static inline float __ll2float_rn(long long v) { return (float)v; }
static inline double __ll2double_rn(long long v) { return (double)v; }
static inline float __double2float_rn(double v) { return (float)v; }
static inline float __ll2float_ru(long long v) {
  float f = (float)v;
  return (long double)f < (long double)v ? nextafterf(f, INFINITY) : f;
}
static inline float __ll2float_rd(long long v) {
  float f = (float)v;
  return (long double)f > (long double)v ? nextafterf(f, -INFINITY) : f;
}
static inline double __ll2double_ru(long long v) {
  double f = (double)v;
  return (long double)f < (long double)v ? nextafter(f, INFINITY) : f;
}
static inline double __ll2double_rd(long long v) {
  double f = (double)v;
  return (long double)f > (long double)v ? nextafter(f, -INFINITY) : f;
}
/* common.cuh's PTX conversions: the CPU reference's (round to nearest even) */
static inline float bq_f16_to_f32(unsigned short h) { return ref_f16_to_f32(h); }
static inline unsigned short bq_f32_to_f16(float f) { return ref_f32_to_f16(f); }
static inline unsigned short bq_f32_to_bf16(float f) { return ref_f32_to_bf16(f); }
/* max.xorsign.abs.{bf16x2,f16x2} on the bits of two pairs: each half max(|u|, |v|) with the
   XOR of their signs; a NaN operand gives the other's magnitude, two give the canonical NaN */
#define bq_hmax2_xabs(u, v) emu_hmax2_xabs((u), (v), BQ_FT == BQ_TYPE_BF16)
static inline unsigned emu_hmax2_xabs(unsigned u, unsigned v, int bf16) {
  const unsigned inf = bf16 ? 0x7f80u : 0x7c00u;
  unsigned d = 0;
  for (int h = 0; h < 32; h += 16) {
    const unsigned a = (u >> h) & 0xffffu, b = (v >> h) & 0xffffu;
    const unsigned ma = a & 0x7fffu, mb = b & 0x7fffu;
    const int na = ma > inf, nb = mb > inf;
    unsigned m = na && nb ? 0x7fffu : na ? mb : nb ? ma : (ma > mb ? ma : mb);
    d |= (m | ((a ^ b) & 0x8000u)) << h;
  }
  return d;
}
/* fma.rn.{bf16x2,f16x2} and min.{bf16x2,f16x2} on two pairs' bits, each half alone: the fma
   exact in double (the kernels' operands: half products and sums of few bits), then rounded
   to nearest even into the half type, subnormals kept; NaN gives the canonical 0x7fff; min
   drops a NaN operand. bf16: 8 exponent bits, 7 mantissa bits; f16: 5 and 10 (half to f32 is
   exact: tests/reference.h decodes). */
static inline double emu_half_value(unsigned h, int bf16) {
  return bf16 ? ref_bf16_to_f32((uint16_t)h) : ref_f16_to_f32((uint16_t)h);
}
static inline unsigned emu_half_of(double v, int bf16) {
  const int mb = bf16 ? 7 : 10, bias = bf16 ? 127 : 15, emin = 1 - bias, emax = bf16 ? 127 : 15;
  if (v != v) return 0x7fffu;
  const unsigned sign = signbit(v) ? 0x8000u : 0u, inf = bf16 ? 0x7f80u : 0x7c00u;
  const double a = fabs(v);
  if (a == 0.0) return sign;
  int e;
  frexp(a, &e); /* a in [2^(e-1), 2^e) */
  const int q = (e - 1 < emin ? emin : e - 1) - mb; /* the grid's step, 2^q */
  const double n = a * ldexp(1.0, -q);
  double f = floor(n);
  if (n - f > 0.5 || (n - f == 0.5 && fmod(f, 2.0) != 0.0)) f += 1.0;
  const double r = ldexp(f, q);
  if (r >= ldexp(1.0, emax + 1)) return sign | inf;
  if (r < ldexp(1.0, emin)) return sign | (unsigned)f; /* a subnormal's mantissa */
  int re;
  const double mr = frexp(r, &re); /* r = mr 2^re, mr in [0.5, 1) */
  return sign | (unsigned)(re - 1 + bias) << mb | ((unsigned)ldexp(mr, mb + 1) & ((1u << mb) - 1u));
}
#define bq_h2_fma(a, b, c) emu_h2_fma((a), (b), (c), BQ_FT == BQ_TYPE_BF16)
#define bq_h2_min(a, b) emu_h2_min((a), (b), BQ_FT == BQ_TYPE_BF16)
static inline unsigned emu_h2_fma(unsigned a, unsigned b, unsigned c, int bf16) {
  unsigned d = 0;
  for (int h = 0; h < 32; h += 16)
    d |= emu_half_of(fma(emu_half_value((a >> h) & 0xffffu, bf16), emu_half_value((b >> h) & 0xffffu, bf16),
                         emu_half_value((c >> h) & 0xffffu, bf16)), bf16) << h;
  return d;
}
static inline unsigned emu_h2_min(unsigned a, unsigned b, int bf16) {
  unsigned d = 0;
  for (int h = 0; h < 32; h += 16) {
    const unsigned x = (a >> h) & 0xffffu, y = (b >> h) & 0xffffu;
    const double u = emu_half_value(x, bf16), v = emu_half_value(y, bf16);
    d |= (u != u ? (v != v ? 0x7fffu : y) : v != v ? x : v < u || (v == u && (y & 0x8000u)) ? y : x) << h;
  }
  return d;
}
/* set.geu.{bf16x2,f16x2}.{bf16x2,f16x2}: each half 1.0 where a >= b or either is NaN, else 0 */
#define bq_h2_geu(a, b) emu_h2_geu((a), (b), BQ_FT == BQ_TYPE_BF16)
static inline unsigned emu_h2_geu(unsigned a, unsigned b, int bf16) {
  unsigned d = 0;
  for (int h = 0; h < 32; h += 16) {
    const double u = emu_half_value((a >> h) & 0xffffu, bf16), v = emu_half_value((b >> h) & 0xffffu, bf16);
    d |= (u != u || v != v || u >= v ? (bf16 ? 0x3f80u : 0x3c00u) : 0u) << h;
  }
  return d;
}
/* cvt.rp.f16.f32 (f > 0: the round to nearest's pattern, one up where that lies below f) */
static inline unsigned bq_f32_to_f16_ru(float f) {
  const unsigned short h = ref_f32_to_f16(f);
  return ref_f16_to_f32(h) < f ? h + 1u : h;
}
/* fma.rp.f32 (__fmaf_ru): the exact a b + c in long double (its 64 bits hold the kernels'
   operands' sums: a has at most 3 bits, c's bits sit within 48 below a b's), then up */
static inline float __fmaf_ru(float a, float b, float c) {
  const long double e = (long double)a * b + c;
  const float r = (float)e;
  return (long double)r < e ? nextafterf(r, INFINITY) : r;
}
/* prmt.b32 (the default mode): byte n of the result is byte sel[4n+2:4n] of {b, a}, or that
   byte's sign bit replicated where bit 4n + 3 of sel is set */
static inline unsigned bq_prmt(unsigned a, unsigned b, unsigned sel) {
  const unsigned long long x = (unsigned long long)b << 32 | a;
  unsigned d = 0;
  for (int n = 0; n < 4; n++) {
    const unsigned s = (sel >> (4 * n)) & 15u, byte = (unsigned)(x >> (8 * (s & 7))) & 0xffu;
    d |= (s & 8u ? (byte & 0x80u ? 0xffu : 0u) : byte) << (8 * n);
  }
  return d;
}
/* cvt.rni.s8.f32 / cvt.rni.u8.f32: round half to even, clamp to the int type (BQ_I_MIN and
   BQ_I_MAX, from common.cuh where this is called), NaN -> 0 */
#define bq_cvt_sat(v) emu_cvt_sat((v), BQ_I_MIN, BQ_I_MAX)
static inline int emu_cvt_sat(float v, int lo, int hi) {
  if (v != v) return 0;
  float r = rintf(v);
  return r < (float)lo ? lo : r > (float)hi ? hi : (int)r;
}
/* cvt.rni.s16.f32, and two cvt.pack.sat.{s8,u8}.s32.b32: four ints saturated to the int
   type, e0 in the low byte */
#define bq_cvt_s16(v) emu_cvt_sat((v), -32768, 32767)
#define bq_pack4(e0, e1, e2, e3) emu_pack4((e0), (e1), (e2), (e3), BQ_I_MIN, BQ_I_MAX)
static inline unsigned emu_pack4(int e0, int e1, int e2, int e3, int lo, int hi) {
  const int e[4] = {e0, e1, e2, e3};
  unsigned w = 0;
  for (int i = 0; i < 4; i++) w |= (unsigned)((e[i] < lo ? lo : e[i] > hi ? hi : e[i]) & 0xff) << (8 * i);
  return w;
}
static inline void __trap() { fprintf(stderr, "emu: __trap\n"); abort(); }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }

static inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; i++) c += (int)(signed char)(a >> (8 * i)) * (int)(signed char)(b >> (8 * i));
  return c;
}
/* a warp's shuffle: every lane's v, read back from lane src */
template <typename V> static inline V emu_shfl(unsigned mask, V v, int src) {
  memcpy(emu_slot(emu_lane()), &v, sizeof v);
  emu_warp_sync(mask);
  V r;
  memcpy(&r, emu_slot(src & 31), sizeof r);
  emu_warp_sync(mask);
  return r;
}
static inline int __shfl_xor_sync(unsigned mask, int v, int lanemask) { return emu_shfl(mask, v, emu_lane() ^ lanemask); }
static inline int __shfl_sync(unsigned mask, int v, int src) { return emu_shfl(mask, v, src); }
static inline float __shfl_sync(unsigned mask, float v, int src) {
  return __uint_as_float((unsigned)__shfl_sync(mask, (int)__float_as_uint(v), src));
}
static inline double __shfl_sync(unsigned mask, double v, int src) { return emu_shfl(mask, v, src); }
static inline unsigned __ballot_sync(unsigned mask, int pred) {
  memcpy(emu_slot(emu_lane()), &pred, 4);
  emu_warp_sync(mask);
  unsigned r = 0;
  for (int l = 0; l < 32; l++) {
    int v;
    memcpy(&v, emu_slot(l), 4);
    r |= (unsigned)(v != 0 && (mask >> l & 1u)) << l;
  }
  emu_warp_sync(mask);
  return r;
}
static inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) == mask; }
static inline float __shfl_xor_sync(unsigned mask, float v, int lanemask) {
  return __uint_as_float((unsigned)__shfl_xor_sync(mask, (int)__float_as_uint(v), lanemask));
}
static inline double __shfl_xor_sync(unsigned mask, double v, int lanemask) { return emu_shfl(mask, v, emu_lane() ^ lanemask); }

/* ---- shared memory and the PTX wrappers of linear.cu ---------------------------------------------- */
#define BQ_DYNAMIC_SMEM(name) unsigned char *name = emu.smem
static inline unsigned bq_smem_addr(const void *p) { return (unsigned)((const unsigned char *)p - emu.smem); }
static inline unsigned char *emu_smem_at(unsigned a, int bytes) {
  if ((size_t)a + (size_t)bytes > emu.smem_bytes) {
    fprintf(stderr, "emu: shared access [%u, %u) past the %u bytes of the launch\n", a, a + bytes, emu.smem_bytes);
    abort();
  }
  return emu.smem + a;
}

static inline void bq_st_shared16(unsigned dst, uint4 v) { memcpy(emu_smem_at(dst, 16), &v, 16); }

static inline void emu_cp_async(unsigned dst, const void *src, int bytes, int size) {
  if (dst % size) { fprintf(stderr, "emu: cp.async to a misaligned shared address\n"); abort(); }
  if (bytes && ((uintptr_t)src % size)) { fprintf(stderr, "emu: cp.async from a misaligned global address\n"); abort(); }
  if (bytes < 0 || bytes > size) { fprintf(stderr, "emu: cp.async of %d bytes into %d\n", bytes, size); abort(); }
  if (emu.eager_copies) {
    unsigned char *d = emu_smem_at(dst, size);
    memset(d, 0, (size_t)size);
    if (bytes) memcpy(d, src, (size_t)bytes);
    return;
  }
  emu.cur->open.push_back(emu_copy{dst, (const unsigned char *)src, bytes, size});
}
static inline void bq_cp_async16(unsigned dst, const void *src, int bytes) { emu_cp_async(dst, src, bytes, 16); }
static inline void bq_cp_async4(unsigned dst, const void *src, int bytes) { emu_cp_async(dst, src, bytes, 4); }
static inline void bq_cp_commit() {
  emu.cur->groups.push_back(emu.cur->open);
  emu.cur->open.clear();
}
template <int N> static inline void bq_cp_wait() {
  auto &g = emu.cur->groups;
  while ((int)g.size() > N) {
    for (const emu_copy &c : g.front()) {
      unsigned char *d = emu_smem_at(c.dst, c.size);
      memset(d, 0, (size_t)c.size);
      if (c.bytes) memcpy(d, c.src, (size_t)c.bytes);
    }
    g.erase(g.begin());
  }
}

/* ldmatrix .x4: lanes 8j..8j+7 give the row addresses of matrix j; lane t gets, of each
   matrix, the 32-bit word at row t / 4, bytes 4 (t % 4) .. 4 (t % 4) + 3. */
static inline void bq_ldmatrix4(unsigned (&r)[4], unsigned addr) {
  if (addr % 16) { fprintf(stderr, "emu: ldmatrix row address not 16-byte aligned\n"); abort(); }
  memcpy(emu_slot(emu_lane()), &addr, 4);
  emu_warp_sync();
  int t = emu_lane();
  for (int j = 0; j < 4; j++) {
    unsigned row;
    memcpy(&row, emu_slot(8 * j + t / 4), 4);
    memcpy(&r[j], emu_smem_at(row + 4 * (t % 4), 4), 4);
  }
  emu_warp_sync();
}

/* mma.sync m16n8k32 .row.col, s32 += A (s8, or u8 when BQ_IT == 1) x B (s8). Lane l,
   g = l / 4, q = l % 4: a0 = A[g][4q..], a1 = A[g+8][4q..], a2 = A[g][16+4q..],
   a3 = A[g+8][16+4q..]; b0 = B[4q..][g], b1 = B[16+4q..][g]; d0, d1 = D[g][2q, 2q+1],
   d2, d3 = D[g+8][2q, 2q+1]. The sum wraps modulo 2^32 as the hardware's does. */
static int emu_a_unsigned; /* the test sets it: A is u8 (linear.cu's BQ_IT == 1) */
static inline int emu_a(int r, int k) {
  int lane = (r % 8) * 4 + (k % 16) / 4, reg = (r >= 8) + 2 * (k >= 16);
  unsigned w;
  memcpy(&w, emu_slot(lane) + 4 * reg, 4);
  unsigned b = (w >> (8 * (k % 4))) & 0xff;
  return emu_a_unsigned ? (int)b : (int)(signed char)b;
}
static inline int emu_b(int k, int n) {
  int lane = n * 4 + (k % 16) / 4, reg = 4 + (k >= 16);
  unsigned w;
  memcpy(&w, emu_slot(lane) + 4 * reg, 4);
  return (int)(signed char)((w >> (8 * (k % 4))) & 0xff);
}
static inline void bq_mma(int (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  unsigned in[6] = {a0, a1, a2, a3, b0, b1};
  memcpy(emu_slot(emu_lane()), in, sizeof in);
  emu_warp_sync();
  int l = emu_lane(), g = l / 4, q = l % 4;
  int a[2][32], b[2][32]; /* this lane's two rows of A and two columns of B, read once */
  for (int k = 0; k < 32; k++) {
    a[0][k] = emu_a(g, k), a[1][k] = emu_a(g + 8, k);
    b[0][k] = emu_b(k, 2 * q), b[1][k] = emu_b(k, 2 * q + 1);
  }
  for (int e = 0; e < 4; e++) {
    const int *ar = a[e >> 1], *bc = b[e & 1];
    unsigned s = (unsigned)d[e];
    for (int k = 0; k < 32; k++) s += (unsigned)(ar[k] * bc[k]);
    d[e] = (int)s;
  }
  emu_warp_sync();
}

/* FP8 (linear.cu with BQ_OP_FP8_LINEAR): A e4m3 (e5m2 when the test sets emu_a_e5m2), B e4m3,
   f32 D. The tensor cores' FP8 sums are the hardware's own; the model here is one step's 32
   products summed exactly (they fit a double exactly), rounded to f32, then added to D in
   f32. The tests' CPU reference uses the same model, so an emulated run checks the kernels'
   tiling, K order, promotion and epilogue bit for bit; the GPU tests bound the hardware. */
static int emu_a_e5m2;
static inline double emu_f8_decode(unsigned b, int e5m2) {
  const int s = b >> 7, e = e5m2 ? (b >> 2) & 31 : (b >> 3) & 15, m = e5m2 ? b & 3 : b & 7, mb = e5m2 ? 2 : 3;
  const int bias = e5m2 ? 15 : 7;
  double v = e ? ldexp(1.0 + m / (double)(1 << mb), e - bias) : ldexp(m / (double)(1 << mb), 1 - bias);
  return s ? -v : v;
}
/* by table: every operand of every product is decoded (two library calls each, most of
   the emulated FP8 GEMM's time) */
static inline double emu_f8_value(unsigned b, int e5m2) {
  static const struct table {
    double v[2][256];
    table() {
      for (int k = 0; k < 2; k++)
        for (unsigned c = 0; c < 256; c++) v[k][c] = emu_f8_decode(c, k);
    }
  } t;
  return t.v[e5m2 ? 1 : 0][b & 255u];
}
static inline unsigned emu_byte_of(int lane, int reg, int k) {
  unsigned w;
  memcpy(&w, emu_slot(lane) + 4 * reg, 4);
  return (w >> (8 * (k % 4))) & 0xff;
}
static inline void bq_mma(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  unsigned in[6] = {a0, a1, a2, a3, b0, b1};
  memcpy(emu_slot(emu_lane()), in, sizeof in);
  emu_warp_sync();
  int l = emu_lane(), g = l / 4, q = l % 4;
  double a[2][32], b[2][32]; /* this lane's two rows of A and two columns of B, decoded once */
  for (int k = 0; k < 32; k++) {
    for (int h = 0; h < 2; h++) {
      const int r = g + 8 * h, n = 2 * q + h;
      a[h][k] = emu_f8_value(emu_byte_of((r % 8) * 4 + (k % 16) / 4, (r >= 8) + 2 * (k >= 16), k), emu_a_e5m2);
      b[h][k] = emu_f8_value(emu_byte_of(n * 4 + (k % 16) / 4, 4 + (k >= 16), k), 0);
    }
  }
  for (int e = 0; e < 4; e++) {
    const double *ar = a[e >> 1], *bc = b[e & 1];
    double s = 0;
    for (int k = 0; k < 32; k++) s += ar[k] * bc[k];
    d[e] = d[e] + (float)s;
  }
  emu_warp_sync();
}

/* ---- wgmma (sm_90a): D[64 x 256] += A[64 x 32] B[256 x 32]^T from shared memory --------------
   Descriptors: start address >> 4 in bits 0-13, leading byte offset (unused by the 128-byte
   swizzle) at 16, stride byte offset >> 4 at 32 (8-row groups), swizzle mode at 62 (1:
   128 bytes). Element (r, k) of a K-major operand lies at lin = start + (r / 8) SBO +
   (r % 8) 128 + k, with the 16-byte chunk bits 4-6 of lin XORed with its bits 7-9. The
   products run at wgmma.wait_group, reading shared memory then: a kernel that refills a
   slice while a wgmma still reads it gets wrong sums. Thread t of warp w (in its
   warpgroup) holds d[i] = D[16 w + t / 4 + 8 ((i / 2) % 2)][8 (i / 4) + 2 (t % 4) + i % 2]. */
static inline int emu_desc_byte(unsigned long long desc, int r, int k, int is_a) {
  unsigned start = (unsigned)(desc & 0x3FFF) << 4, sbo = (unsigned)((desc >> 32) & 0x3FFF) << 4;
  int mode = (int)(desc >> 62);
  if (mode != 1) { fprintf(stderr, "emu: wgmma descriptor swizzle mode %d is not modelled\n", mode); abort(); }
  unsigned lin = start + (unsigned)(r / 8) * sbo + (unsigned)(r % 8) * 128 + (unsigned)k;
  unsigned phys = lin ^ (((lin >> 7) & 7) << 4);
  unsigned char b = *emu_smem_at(phys, 1);
  return is_a && emu_a_unsigned ? (int)b : (int)(signed char)b;
}
static inline unsigned emu_desc_raw(unsigned long long desc, int r, int k) {
  unsigned start = (unsigned)(desc & 0x3FFF) << 4, sbo = (unsigned)((desc >> 32) & 0x3FFF) << 4;
  unsigned lin = start + (unsigned)(r / 8) * sbo + (unsigned)(r % 8) * 128 + (unsigned)k;
  return *emu_smem_at(lin ^ (((lin >> 7) & 7) << 4), 1);
}
static inline void emu_wgmma_run(const emu_wgmma &op) {
  int t = emu_index() & 127, w = t / 32, l = t % 32;
  if (op.df) { /* FP8, m64n128k32 or m64n16k32: the model of bq_mma */
    for (int i = 0; i < op.nd; i++) {
      int r = 16 * w + l / 4 + 8 * ((i / 2) % 2), n = 8 * (i / 4) + 2 * (l % 4) + i % 2;
      double s = 0;
      for (int k = 0; k < 32; k++)
        s += emu_f8_value(emu_desc_raw(op.da, r, k), op.b_acts ? 0 : emu_a_e5m2) *
             emu_f8_value(emu_desc_raw(op.db, n, k), op.b_acts ? emu_a_e5m2 : 0);
      op.df[i] = op.acc ? op.df[i] + (float)s : (float)s;
    }
    return;
  }
  for (int i = 0; i < 128; i++) {
    int r = 16 * w + l / 4 + 8 * ((i / 2) % 2), n = 8 * (i / 4) + 2 * (l % 4) + i % 2;
    unsigned s = (unsigned)op.d[i];
    for (int k = 0; k < 32; k++) s += (unsigned)(emu_desc_byte(op.da, r, k, 1) * emu_desc_byte(op.db, n, k, 0));
    op.d[i] = (int)s;
  }
}
static inline void bq_wgmma(int (&d)[128], unsigned long long da, unsigned long long db) {
  emu.cur->wg_open.push_back(emu_wgmma{d, da, db, NULL, 0, 0, 0});
}
static inline void bq_wgmma_f8(float (&d)[64], unsigned long long da, unsigned long long db, int acc) {
  (void)emu_desc_byte(da, 0, 0, 0); /* (checks the swizzle mode) */
  emu.cur->wg_open.push_back(emu_wgmma{NULL, da, db, d, acc, 64, 0});
}
static inline void bq_wgmma_f8_n16(float (&d)[8], unsigned long long da, unsigned long long db, int acc) {
  (void)emu_desc_byte(da, 0, 0, 0);
  emu.cur->wg_open.push_back(emu_wgmma{NULL, da, db, d, acc, 8, 1}); /* A the weights, B x */
}
static inline void bq_wg_fence() {}
static inline void bq_wg_commit() {
  emu.cur->wg_groups.push_back(emu.cur->wg_open);
  emu.cur->wg_open.clear();
}
template <int N> static inline void bq_wg_wait() {
  auto &g = emu.cur->wg_groups;
  while ((int)g.size() > N) {
    for (const emu_wgmma &op : g.front()) emu_wgmma_run(op);
    g.erase(g.begin());
  }
}
static inline void bq_fence_proxy_async() {}

/* ---- mbarriers and the tensor memory accelerator (sm_90a) ------------------------------------- */
static inline emu_mbar *emu_mbar_at(unsigned addr) {
  if (addr % 8) { fprintf(stderr, "emu: mbarrier at %u, off an 8-byte boundary\n", addr); abort(); }
  (void)emu_smem_at(addr, 8);
  for (int i = 0; i < emu.nmbar; i++)
    if (emu.mbar[i].addr == addr) return &emu.mbar[i];
  fprintf(stderr, "emu: mbarrier at %u used before mbarrier.init\n", addr);
  abort();
}
static inline void bq_mbar_init(unsigned addr, int count) {
  if (addr % 8 || count < 1 || emu.nmbar == 64) { fprintf(stderr, "emu: bad mbarrier.init\n"); abort(); }
  (void)emu_smem_at(addr, 8);
  for (int i = 0; i < emu.nmbar; i++)
    if (emu.mbar[i].addr == addr) { fprintf(stderr, "emu: mbarrier at %u initialized twice\n", addr); abort(); }
  emu.mbar[emu.nmbar++] = emu_mbar{addr, count, count, 0, 0};
}
static inline void bq_mbar_init_fence() {}
/* a warpgroup's register budget: nothing to model */
template <int N> static inline void bq_setmaxnreg_dec() {}
template <int N> static inline void bq_setmaxnreg_inc() {}
/* a phase completes when every arrival and every byte it expects is in */
static inline void emu_mbar_check(emu_mbar *b) {
  if (b->pending == 0 && b->tx == 0) {
    b->phase++;
    b->pending = b->count;
    emu.progress++;
  }
}
static inline void emu_mbar_arrive(unsigned addr) {
  emu_mbar *b = emu_mbar_at(addr);
  if (b->pending <= 0) { fprintf(stderr, "emu: mbarrier at %u: more arrivals than its count\n", addr); abort(); }
  b->pending--;
  emu.progress++;
  emu_mbar_check(b);
}
/* an arrival lets the others run at once: a stage released before its readers are done
   with it is then refilled under them (the copies land at issue), and their sums show it */
static inline void bq_mbar_arrive(unsigned addr) {
  emu_mbar_arrive(addr);
  emu_yield();
}
static inline void bq_mbar_expect(unsigned addr, int bytes) {
  emu_mbar_at(addr)->tx += bytes;
  emu_mbar_arrive(addr);
}
/* the phase of parity `parity` has completed once the current one's parity differs */
static inline void bq_mbar_wait(unsigned addr, int parity) {
  while ((int)(emu_mbar_at(addr)->phase & 1u) == parity) emu_yield();
}
/* emu_tensor_map's encoding: a tag, the base, then K bytes and rows, the row stride, the box */
#define EMU_TMAP_TAG 0x50414d54554d45ull /* "EMUTMAP" */
static inline void bq_tma_load(unsigned dst, const void *tmap, int c0, int c1, unsigned bar) {
  const unsigned long long *m = (const unsigned long long *)tmap;
  if (m[0] != EMU_TMAP_TAG) { fprintf(stderr, "emu: a tensor map the emulator did not encode\n"); abort(); }
  const unsigned char *base = (const unsigned char *)(uintptr_t)m[1];
  const long long k = (long long)m[2], rows = (long long)m[3], ld = (long long)m[4];
  const int box0 = (int)m[5], box1 = (int)m[6];
  if (dst % 1024) { fprintf(stderr, "emu: a 128-byte-swizzled box at %u, off a 1024-byte boundary\n", dst); abort(); }
  for (int r = 0; r < box1; r++)
    for (int j = 0; j < box0; j++) {
      const long long gr = (long long)c1 + r, gk = (long long)c0 + j;
      const unsigned lin = dst + (unsigned)(r * box0 + j);
      *emu_smem_at(lin ^ (((lin >> 7) & 7) << 4), 1) = gr < rows && gk < k ? base[gr * ld + gk] : 0;
    }
  emu_mbar *b = emu_mbar_at(bar);
  b->tx -= (long long)box0 * box1;
  emu.progress++;
  emu_mbar_check(b);
}
/* cuTensorMapEncodeTiled for the emulator: the checks of the driver that the library's maps
   meet (2-D bytes, 16-byte base and stride, boxes of 128 bytes in the 128-byte swizzle) */
static inline int emu_tensor_map(void *map, int type, unsigned rank, void *base, const unsigned long long *dims,
                                 const unsigned long long *strides, const unsigned *box, const unsigned *estrides,
                                 int interleave, int swizzle, int l2, int fill) {
  (void)l2;
  if (((uintptr_t)map % 64) || type != 0 || rank != 2 || ((uintptr_t)base % 16) || strides[0] % 16 ||
      strides[0] < dims[0] || box[0] != 128 || box[1] < 1 || box[1] > 256 || estrides[0] != 1 || estrides[1] != 1 ||
      interleave != 0 || swizzle != 3 || fill != 0 || dims[0] < 1 || dims[1] < 1) {
    fprintf(stderr, "emu: a tensor map the driver would refuse\n");
    abort();
  }
  unsigned long long *m = (unsigned long long *)map;
  memset(m, 0, 128);
  m[0] = EMU_TMAP_TAG, m[1] = (uintptr_t)base, m[2] = dims[0], m[3] = dims[1], m[4] = strides[0];
  m[5] = box[0], m[6] = box[1];
  return 0;
}

#endif
