/* tests/test_mx_emulated.cpp - kernels_src/mx.cu (the microscaling formats: MXFP8, MXFP4,
   NVFP4) run on the CPU by tests/emulator/cuda_emulator.h through the header's own run
   path, against the CPU reference (tests/reference_mxops.h) bit for bit: codes, scales
   (padding included) and NVFP4's tensor scale. A host test, so that CI checks the kernels'
   logic on every change; test_gpu_mx is the real thing. Built once per specialization
   (tests/meson.build names it; tests/emu_spec.c writes the header EMU_SPEC).
   Each case draws [rows, cols] in groups of G (16 and 32 on bq_mx16 / bq_mx32, other sizes
   on bq_mx_any, and now and then 16 or 32 forced onto bq_mx_any), row strides with padding,
   base offsets off the 16-byte grid, a leading dimension for row-major and MN-major scales,
   and data of several kinds: random magnitudes, exact multiples of the element grid (ties
   at each binade), zeros, NaN and inf, values past the saturation point, subnormals. Static
   scales are random codes near the data (UE8M0 0, 254 and NaN among them; E4M3 any code),
   NVFP4's tensor scale random, or for dynamic quantize computed by the amax pass half the
   time. Outputs are poisoned, guarded and compared whole. Stochastic rounding's builds
   (round=sr) draw a seed and an offset (off the 8-element sets now and then, and near 2^64,
   where the index wraps), check the element rounding on random f32 / f64 values against the
   reference's, and that rows run alone (their offset advanced) give the whole call's bits.
   The fused rotation's builds (rot=1) run every case on bq_mx_lanes' grid with a random block
   (2 to 32 accesses), against reference_rotate.h's rotation followed by the reference (or
   preceded by it, for dequantize). */
#include <emu_prefix.h> /* the header, references, emulator and Criterion: precompiled */
#include "reference_mxops.h"

#include "emulator/cuda_emulator.h"

/* the specialization: EMU_* and the host's prelude, from tests/emu_spec.c (meson) */
#include EMU_SPEC
namespace emu_mx {
#define EMU_SECTION 1
#include EMU_SPEC
#undef EMU_SECTION
#include "../kernels_src/common.cuh"
#include "../kernels_src/mx.cu"
#include "emulator/kernel_undefs.h"
} // namespace emu_mx

#include <criterion/criterion.h>

#include "emulator/emu_test.h"

#include <vector>

static void k16(const void *p) { emu_mx::bq_mx16(*(const bq_mx_params *)p); }
static void k32(const void *p) { emu_mx::bq_mx32(*(const bq_mx_params *)p); }
static void kany(const void *p) { emu_mx::bq_mx_any(*(const bq_mx_params *)p); }
static void kamax(const void *p) { emu_mx::bq_mx_amax(*(const bq_mx_params *)p); }
static int g_lacc; /* bq_mx_lanes' last launch: its pieces a lane (log2) */
static void klanes(const void *p) {
  g_lacc = ((const bq_mx_params *)p)->lacc;
  emu_mx::bq_mx_lanes(*(const bq_mx_params *)p);
}

static const bq_dtype T = (bq_dtype)EMU_T, I = (bq_dtype)EMU_I, ST = (bq_dtype)EMU_ST;
static const int E2M1 = EMU_I == BQ_TYPE_E2M1, NV = EMU_ST == BQ_TYPE_E4M3;
static const bq_op OP = (bq_op)EMU_OP;

static emu_kernel g_last; /* the last kernel launched (the amax pass's aside) */
static int g_lanes_runs; /* cases that ran bq_mx_lanes (the shapes test asserts some did) */
static int g_amax_launches; /* (two a computed tensor scale: partials, then g) */
static void note_kernel(emu_kernel k, unsigned gx, unsigned gy, unsigned bx, unsigned smem) {
  (void)gx, (void)gy, (void)bx, (void)smem;
  if (k == (emu_kernel)kamax) g_amax_launches++;
  else g_last = k;
}
static void init(void) {
  emu_test_init();
  emu_launch_check = note_kernel;
}
TestSuite(emulated_mx, .init = init);

static bq_desc the_desc(void) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = OP;
  d.direction = EMU_BWD ? BQ_BACKWARD : BQ_FORWARD;
  d.granularity = BQ_PER_GROUP;
  d.float_type = T;
  d.int_type = I;
  d.scale_type = ST;
  d.scale_layout = (bq_scale_layout)EMU_LAYOUT;
  d.scale_rule = (bq_scale_rule)EMU_RULE;
  d.rounding = EMU_SR ? BQ_ROUND_STOCHASTIC : BQ_ROUND_NEAREST_EVEN;
  d.rotation = EMU_ROT;
  d.random_signs = EMU_SIGNS;
  return d;
}

/* a value of kind k near magnitude mag (for the element grid: mag is a power of two) */
static const double MAXE = E2M1 ? 6.0 : EMU_I == BQ_TYPE_E4M3 ? 448.0 : 57344.0;
static double value(int k, double mag) {
  const double s = rnd() & 1 ? -1.0 : 1.0;
  switch (k) {
  case 0: return 0.0 * s;
  case 1: /* on the element grid and its midpoints, at the scale mag / max (ties) */
    return s * ldexp((double)rnd_range(0, 64), -3) * mag / (E2M1 ? 4.0 : MAXE / 8);
  case 2: return rnd() % 7 == 0 ? NAN : rnd() % 5 == 0 ? s * INFINITY : s * rnd_unit() * mag;
  case 3: return s * mag * (1.0 + rnd_unit()) * (rnd() % 3 ? 1.0 : 1e6); /* far past the group's others */
  case 4: return s * ldexp(rnd_unit(), T == BQ_F64 ? -1060 : T == BQ_F32 ? -140 : T == BQ_F16 ? -20 : -130);
  default: return s * rnd_unit() * mag;
  }
}

/* stochastic rounding's seed and offset for a case (0 and 0 in the other builds) */
static void draw_sr(bq_args *a) {
  if (EMU_SIGNS) a->seed = rnd(); /* (the fused rotation's signs) */
  if (!EMU_SR) return;
  a->seed = rnd();
  const int k = (int)(rnd() % 4);
  a->offset = k == 0 ? 0 : k == 1 ? rnd() % 1000 : k == 2 ? rnd() : ~0ull - rnd() % 5000;
}

/* static scales: codes near the data (UE8M0 2^-17 .. 2^8, and now and then 0, 254 or NaN;
   E4M3 0x20 .. 0x50, and now and then any code) */
static void fill_scales(unsigned char *sc, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    if (NV) sc[i] = (unsigned char)(rnd() % 8 == 0 ? rnd() : (uint64_t)rnd_range(0x20, 0x50));
    else sc[i] = (unsigned char)(rnd() % 16 == 0 ? (rnd() % 3 == 0 ? 0 : rnd() % 2 ? 254 : 255) : (int)rnd_range(110, 135));
  }
}

/* the plan of this build's descriptor, its entry points the emulated kernels (one SM in a
   third of the cases: a few blocks stride over every group) */
static bq__entry g_entry;
static void plan_of(bq_desc *d, bq_plan *plan, int rep) {
  *d = the_desc();
  cr_assert_eq(bq__plan_init(d, plan), BQ_SUCCESS, "%s", bq_last_error());
  memset(&g_entry, 0, sizeof g_entry);
  g_entry.fn[BQ__MX_G16] = (bq__CUfunction)k16;
  g_entry.fn[BQ__MX_G32] = (bq__CUfunction)k32;
  g_entry.fn[BQ__MX_ANY] = (bq__CUfunction)kany;
  g_entry.fn[BQ__MX_AMAX] = (bq__CUfunction)kamax;
  g_entry.fn[BQ__MX_LANES] = (bq__CUfunction)klanes;
  for (int e = 0; e < BQ__MAX_KERNELS; e++) plan->mod[e] = &g_entry;
  plan->num_sms = rep % 3 ? 132 : 1;
}

/* The kernel a run takes, restated: bq_mx_lanes where G is 2^k (k <= 5) times the 16 / T
   elements of a 16-byte access of floats and each stream's base and row stride (bytes) are
   multiples of its piece (16 bytes of floats; 16 / T codes, E2M1 half as many bytes), unless
   the test forced bq_mx_any or the op is dynamic quantize without the rotation; else bq_mx16,
   bq_mx32 or bq_mx_any by G. streams: base, row stride in bytes, piece in bytes. */
struct stream_geom {
  const void *base;
  int64_t stride_bytes, piece;
};
static emu_kernel want_kernel(int64_t G, int forced_any, int forced_lanes, const stream_geom *st, int n) {
  if (forced_any) return (emu_kernel)kany;
  const int64_t E = 16 / (int64_t)ref_dtype_size(T);
  int lanes = G % E == 0 && G / E <= 32 && ((G / E) & (G / E - 1)) == 0 &&
              (OP != BQ_DYNAMIC_QUANTIZE || EMU_ROT || forced_lanes);
  for (int i = 0; i < n && lanes; i++)
    lanes = (uintptr_t)st[i].base % (uintptr_t)st[i].piece == 0 && st[i].stride_bytes % st[i].piece == 0;
  if (lanes) return (emu_kernel)klanes;
  return G == 16 ? (emu_kernel)k16 : G == 32 ? (emu_kernel)k32 : (emu_kernel)kany;
}

static void one_case(int rep) {
  bq_desc d;
  bq_plan plan;
  plan_of(&d, &plan, rep);

  static const int64_t gs_even[] = {16, 32, 16, 32, 2, 8, 48, 64, 10, 128};
  static const int64_t gs_any[] = {16, 32, 16, 32, 1, 7, 8, 48, 64, 33};
  /* every fourth case on bq_mx_lanes' grid: bases and row strides whole pieces, G 2^k pieces
     (every case with the fused rotation, which takes that grid alone, blocks of n too) */
  const int lanes_case = rep % 4 == 1 || EMU_ROT, E = 16 / (int)ref_dtype_size(T);
  const int64_t G = lanes_case ? (int64_t)E << rnd_range(0, 5)
                               : E2M1 ? gs_even[rnd() % 10] : gs_any[rnd() % 10];
  const int force_any = (G == 16 || G == 32) && rnd() % 4 == 0 && !EMU_ROT;
  /* dynamic quantize takes bq_mx_lanes with the rotation alone: half its lanes cases force it */
  const int force_lanes = lanes_case && !force_any && OP == BQ_DYNAMIC_QUANTIZE && !EMU_ROT && rnd() % 2;
  const int rot_n = EMU_ROT ? 2 << rnd_range(0, refmx_rot_max_shift(E)) : 0; /* (2 to 32 E) */
  bq__mx_force_entry = force_any ? BQ__MX_ANY : force_lanes ? BQ__MX_LANES : -1;
  /* bq_mx_lanes' pieces a lane where it may take two: the rule's, or one or two forced */
  const int force_lacc = (int)(rnd() % 3) - 1;
  bq__mx_force_lacc = force_lacc;
  bq_args a;
  memset(&a, 0, sizeof a);
  a.group_size = G;
  a.rows = rep < 4 ? rnd_range(120, 300) : rnd_range(0, 40); /* (the blocked layout's 128-row tiles) */
  a.cols = G * rnd_range(rep == 5 ? 0 : 1, rep < 4 ? 5 : 12);
  if (rep >= 1000) a.rows = 1024, a.cols = G * 64; /* many groups: the rules' rare roundings */
  if (EMU_ROT) { /* (G and n: powers of two) */
    const int64_t n = rot_n > 0 ? rot_n : 1;
    a.rotation_block = n, a.cols = (a.cols + n - 1) / n * n;
  }
  const int64_t step = E2M1 ? 2 : 1;
  /* (lanes cases: now and then a row stride an odd number of pieces, off two pieces' grid) */
  const int64_t odd_x = lanes_case && rnd() % 4 == 0 ? E : 0, odd_y = lanes_case && rnd() % 4 == 0 ? E : 0;
  a.x_row_stride = rnd() & 1 ? 0 : a.cols + (lanes_case ? 32 : step) * rnd_range(0, 9) + odd_x;
  a.y_row_stride = rnd() & 1 ? 0 : a.cols + (lanes_case ? 32 : step) * rnd_range(0, 9) + odd_y;
  const int64_t ng = a.cols / G, xs = a.x_row_stride ? a.x_row_stride : a.cols,
                ys = a.y_row_stride ? a.y_row_stride : a.cols;
  const int64_t grs0 = refmx_default_grs(d.scale_layout, a.rows, ng);
  a.group_row_stride = d.scale_layout == BQ_SCALES_BLOCKED || rnd() & 1 ? 0 : grs0 + rnd_range(0, 3);
  if (d.scale_layout == BQ_SCALES_MN_MAJOR && a.group_row_stride && rnd() & 1) a.group_row_stride = a.rows; /* the least */
  const int64_t grs = a.group_row_stride ? a.group_row_stride : grs0;
  const int64_t nscale = refmx_scale_bytes(d.scale_layout, a.rows, ng, grs);

  /* the float side and the code side, each with guards, bases off the 16-byte grid now and then */
  const int deq = OP == BQ_DEQUANTIZE;
  const size_t ts = ref_dtype_size(T), guard = 48; /* (a multiple of 16: bases on the grid) */
  const int64_t nf = deq ? a.rows * ys : a.rows * xs; /* floats */
  const int64_t ncodes = deq ? a.rows * xs : a.rows * ys, nb = E2M1 ? ncodes / 2 : ncodes; /* code bytes */
  const int offf = lanes_case || rnd() % 3 ? 0 : (int)rnd_range(1, 7),
            offc = lanes_case || rnd() % 3 ? 0 : (int)rnd_range(1, 15);
  std::vector<unsigned char> fb((size_t)nf * ts + 2 * guard + 64), efb(fb.size());
  std::vector<unsigned char> cb((size_t)nb + 2 * guard + 64), ecb(cb.size());
  std::vector<unsigned char> sb((size_t)nscale + 2 * guard + 64), esb(sb.size());
  unsigned char *fl = fb.data() + guard + (size_t)offf * ts, *cd = cb.data() + guard + offc;
  unsigned char *sc = sb.data() + guard, *esc = esb.data() + guard;
  draw_sr(&a);
  char what[400];
  snprintf(what, sizeof what, "seed=0x%llx %s | [%lld,%lld] G %lld strides %lld/%lld grs %lld offs %d/%d%s sms %d "
           "sr %llx+%llu rot %d lacc %d", (unsigned long long)g_seed, EMU_SPEC, (long long)a.rows, (long long)a.cols,
           (long long)G, (long long)xs, (long long)ys, (long long)grs, offf, offc, force_any ? " forced any" : "",
           plan.num_sms, (unsigned long long)a.seed, (unsigned long long)a.offset, rot_n, force_lacc);

  /* inputs */
  double mag = ldexp(1.0, (int)rnd_range(-8, 8));
  int kind = (int)(rnd() % 6);
  if (deq) {
    for (int64_t i = 0; i < nb; i++) cd[i] = (unsigned char)rnd();
  } else {
    for (int64_t i = 0; i < nf; i++) {
      if (i % G == 0 && rnd() % 4 == 0) kind = (int)(rnd() % 6), mag = ldexp(1.0, (int)rnd_range(-8, 8));
      store_any(T, fl, i, value(kind, mag));
    }
  }
  memset(sc - guard, 0xA5, sb.size());
  if (OP != BQ_DYNAMIC_QUANTIZE) fill_scales(sc, nscale);
  memcpy(esb.data(), sb.data(), sb.size());
  /* outputs poisoned */
  if (deq) memset(fb.data(), 0x5A, fb.size());
  else memset(cb.data(), 0x5A, cb.size());
  memcpy(efb.data(), fb.data(), fb.size());
  memcpy(ecb.data(), cb.data(), cb.size());
  /* NVFP4: the tensor scale given, or (dynamic) computed */
  float tsv = (float)ldexp(1.0 + rnd_unit(), (int)rnd_range(-12, 4)), tso = NAN, etso;
  const int computed = NV && OP == BQ_DYNAMIC_QUANTIZE && rnd() % 2;
  /* NVFP4 quantize (scales read): a quarter of each group's elements at a rounding threshold
     t of E2M1 (a midpoint between two magnitudes) times the group's scale, or an ulp of T to
     either side, where x * f32(1 / sc) can land on the other side of t than x / sc */
  if (NV && OP == BQ_QUANTIZE && rnd() % 2) /* a tensor scale of few bits: t sc is then exact in T */
    tsv = (float)ldexp(1.0 + (double)(rnd() % 8) / 8.0, (int)rnd_range(-12, 4));
  /* now and then a tensor scale far out, so that group scales leave [2^-90, 2^90], where
     NVFP4's quotient takes its general form (bq_mx_nv_fast's window) */
  if (NV && !computed && rnd() % 6 == 0) tsv = (float)ldexp(1.0 + rnd_unit(), rnd() % 2 ? -110 : 100);
  if (NV && OP == BQ_QUANTIZE)
    for (int64_t r = 0; r < a.rows; r++)
      for (int64_t gi = 0; gi < ng; gi++) {
        static const double mids[] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
        const uint8_t code = sc[refmx_scale_index(d.scale_layout, r, gi, ng, grs)];
        const double scv = fabs(refmx_sc(&d, code, tsv)); /* (a negative scale too: NVFP4's general quotient) */
        if (!(scv > 0) || scv > 1e30) continue;
        for (int64_t j = 0; j < G; j++) {
          if (rnd() % 4) continue;
          const double v = (rnd() & 1 ? -1.0 : 1.0) * mids[rnd() % 7] * scv;
          store_any(T, fl, r * xs + gi * G + j, v); /* rounded to T */
          if (rnd() % 3 == 0) { /* an ulp of T up or down (by the stored bits) */
            const size_t ts = ref_dtype_size(T);
            unsigned char *e = fl + (size_t)(r * xs + gi * G + j) * ts;
            if (ts == 2) { uint16_t u; memcpy(&u, e, 2); u = (uint16_t)(u + (rnd() & 1 ? 1 : -1)); memcpy(e, &u, 2); }
            else if (ts == 4) { uint32_t u; memcpy(&u, e, 4); u += rnd() & 1 ? 1u : 0xffffffffu; memcpy(e, &u, 4); }
            else { uint64_t u; memcpy(&u, e, 8); u += rnd() & 1 ? 1ull : ~0ull; memcpy(e, &u, 8); }
          }
        }
      }
  if (NV && !computed) a.tensor_scale = &tsv;
  if (computed) a.out_tensor_scale = &tso;
  /* NVFP4 under a peer's rule, the tensor scale given: the first groups of row 0 get an
     amax whose E4M3 code the rule's order of f32 steps decides (another order of the same
     steps gives another code), so that the kernel is held to the order */
  if (NV && EMU_RULE >= 6 && !computed && OP == BQ_DYNAMIC_QUANTIZE && a.rows)
    for (int64_t gi = 0; gi < ng && gi < 4; gi++) {
      uint32_t u = (uint32_t)(0x3f000000u + (rnd() % 0x01000000u)); /* from [0.5, 2) times a power of two */
      float amax = 0;
      for (int k = 0; k < 1 << 20; k++, u += T == BQ_BF16 ? 0x10000u : T == BQ_F16 ? 0x2000u : 1u) {
        float f;
        memcpy(&f, &u, 4);
        f *= tsv * 6.0f;
        if (T == BQ_F16 || T == BQ_BF16) { /* (a value of T) */
          if (T == BQ_F16) f = ref_f16_to_f32(ref_f32_to_f16(f));
          else f = ref_bf16_to_f32(ref_f32_to_bf16(f));
        }
        const uint8_t want = refmx_rule(&d, f, tsv, 1.0f / tsv);
        volatile float e = 1.0f / tsv, c6 = (float)(1.0 / 6.0), t1 = f * e, b1 = t1 * c6, t2 = f / tsv, b2 = t2 * c6;
        const float other = EMU_RULE == 7 ? b1 : b2; /* (f enc) c6, or (f / g) c6 */
        const float oc = EMU_RULE == 6 ? (other < 0x1p-6f ? 0x1p-6f : other > 448.0f ? 448.0f : other) : other;
        if (ref_fp8_from_double((double)oc, REF_E4M3) != want) { amax = f; break; }
      }
      if (amax > 0)
        for (int64_t j = 0; j < G; j++) /* the group's max at amax, the others below it */
          store_any(T, fl, gi * G + j, j == 0 ? (double)amax : (double)amax * 0.5 * rnd_unit());
    }
  memcpy(efb.data(), fb.data(), fb.size());
  a.amax_bound = OP == BQ_DYNAMIC_QUANTIZE && !NV && rnd() % 4 == 0 ? ldexp(1.0 + rnd_unit(), (int)rnd_range(-6, 6)) : 0;
  a.x = deq ? (const void *)cd : (const void *)fl;
  a.y = deq ? (void *)fl : (void *)cd;
  if (OP == BQ_DYNAMIC_QUANTIZE) a.out_scales = sc;
  else a.scales = sc;

  size_t ws_bytes = 0;
  cr_assert_eq(bq_plan_workspace_size(&plan, &a, &ws_bytes), BQ_SUCCESS, "%s | %s", bq_last_error(), what);
  std::vector<unsigned char> wsb(ws_bytes + 16, 0xEE);
  void *ws = ws_bytes ? (void *)(((uintptr_t)wsb.data() + 15) & ~(uintptr_t)15) : NULL;
  g_last = NULL;
  g_amax_launches = 0;
  g_lacc = -1;
  cr_assert_eq(bq_plan_run(&plan, &a, ws, ws_bytes, NULL), BQ_SUCCESS, "%s | %s", bq_last_error(), what);
  bq__mx_force_entry = -1;
  bq__mx_force_lacc = -1;
  if (a.rows && a.cols) {
    const int64_t E = 16 / (int64_t)ts, cpiece = E2M1 ? E / 2 : E;
    const stream_geom st[2] = {{fl, (deq ? ys : xs) * (int64_t)ts, 16},
                               {cd, E2M1 ? (deq ? xs : ys) / 2 : (deq ? xs : ys), cpiece}};
    const emu_kernel want = want_kernel(G, force_any, force_lanes, st, 2);
    cr_assert(g_last == want, "the group kernel launched is not the one for G %lld | %s", (long long)G, what);
    /* two pieces a lane: quantize forward without the rotation, groups of two pieces or
       more, the codes' base and row stride on two pieces' grid; the rule takes two */
    const int pairs = OP == BQ_QUANTIZE && !EMU_BWD && !EMU_ROT && G / E >= 2 &&
                      (uintptr_t)cd % (uintptr_t)(2 * cpiece) == 0 && st[1].stride_bytes % (2 * cpiece) == 0;
    if (want == (emu_kernel)klanes)
      cr_assert_eq(g_lacc, pairs ? (force_lacc >= 0 ? force_lacc : 1) : 0, "bq_mx_lanes' pieces a lane | %s", what);
    cr_assert_eq(g_amax_launches, 2 * computed, "amax passes: %d | %s", g_amax_launches, what);
    g_lanes_runs += want == (emu_kernel)klanes;
  }
  /* the reference on the unpoisoned copies */
  unsigned char *efl = efb.data() + guard + (size_t)offf * ts, *ecd = ecb.data() + guard + offc;
  etso = refmx_op_full(&d, a.rows, a.cols, G, xs, ys, grs, deq ? (const void *)ecd : (const void *)efl,
                       deq ? (void *)efl : (void *)ecd, NULL, NULL, esc, computed ? NAN : tsv, a.amax_bound, a.seed,
                       a.offset, rot_n);
  char msg[2048];
  size_t bad = deq ? ref_compare(T, efb.data(), fb.data(), (int64_t)(fb.size() / ts), msg, sizeof msg)
                   : ref_compare(BQ_U8, ecb.data(), cb.data(), (int64_t)cb.size(), msg, sizeof msg);
  cr_assert_eq(bad, 0, "%s: %zu differ (index from the buffer's start, guard %zu):\n%s| %s", deq ? "floats" : "codes",
               bad, guard, msg, what);
  bad = ref_compare(BQ_U8, esb.data(), sb.data(), (int64_t)sb.size(), msg, sizeof msg);
  cr_assert_eq(bad, 0, "scales: %zu differ (index from the buffer's start, guard %zu):\n%s| %s", bad, guard, msg, what);
  if (computed && a.rows && a.cols)
    cr_assert(!memcmp(&tso, &etso, 4), "tensor scale %a, expected %a | %s", (double)tso, (double)etso, what);
}

/* Fake quantize forward and the backward passes: floats in and out (x and dx on x's strides,
   y and dy on y's), the scales read */
static void one_case_t(int rep) {
  bq_desc d;
  bq_plan plan;
  plan_of(&d, &plan, rep);
  static const int64_t gs[] = {16, 32, 16, 32, 1, 7, 8, 48, 64, 33};
  const int lanes_case = rep % 4 == 1, E = 16 / (int)ref_dtype_size(T); /* (as one_case) */
  const int64_t G = lanes_case ? (int64_t)E << rnd_range(0, 5) : gs[rnd() % 10];
  const int force_any = (G == 16 || G == 32) && rnd() % 4 == 0;
  bq__mx_force_entry = force_any ? BQ__MX_ANY : -1;
  bq_args a;
  memset(&a, 0, sizeof a);
  a.group_size = G;
  a.rows = rep < 4 ? rnd_range(120, 300) : rnd_range(0, 40);
  a.cols = G * rnd_range(rep == 5 ? 0 : 1, rep < 4 ? 5 : 12);
  a.x_row_stride = rnd() & 1 ? 0 : a.cols + (lanes_case ? 32 : 1) * rnd_range(0, 9);
  a.y_row_stride = rnd() & 1 ? 0 : a.cols + (lanes_case ? 32 : 1) * rnd_range(0, 9);
  const int64_t ng = a.cols / G, xs = a.x_row_stride ? a.x_row_stride : a.cols,
                ys = a.y_row_stride ? a.y_row_stride : a.cols;
  const int64_t grs0 = refmx_default_grs(d.scale_layout, a.rows, ng);
  a.group_row_stride = d.scale_layout == BQ_SCALES_BLOCKED || rnd() & 1 ? 0 : grs0 + rnd_range(0, 3);
  const int64_t grs = a.group_row_stride ? a.group_row_stride : grs0;
  const int64_t nscale = refmx_scale_bytes(d.scale_layout, a.rows, ng, grs);
  const int bwd = EMU_BWD;
  const size_t ts = ref_dtype_size(T), guard = 48; /* (a multiple of 16: bases on the grid) */
  const int64_t nx = a.rows * xs, ny = a.rows * ys;
  const int offx = lanes_case || rnd() % 3 ? 0 : (int)rnd_range(1, 7),
            offy = lanes_case || rnd() % 3 ? 0 : (int)rnd_range(1, 7);
  /* x (read), y or dy (forward: written; backward: read), dx (backward: written) */
  std::vector<unsigned char> xb((size_t)nx * ts + 2 * guard + 64), yb((size_t)ny * ts + 2 * guard + 64),
      dxb(xb.size()), edxb(xb.size()), eyb(yb.size());
  std::vector<unsigned char> sb((size_t)nscale + 2 * guard + 64);
  unsigned char *x = xb.data() + guard + (size_t)offx * ts, *y = yb.data() + guard + (size_t)offy * ts;
  unsigned char *dx = dxb.data() + guard + (size_t)offx * ts, *sc = sb.data() + guard;
  draw_sr(&a);
  char what[400];
  snprintf(what, sizeof what, "seed=0x%llx %s | [%lld,%lld] G %lld strides %lld/%lld grs %lld offs %d/%d%s sr %llx+%llu",
           (unsigned long long)g_seed, EMU_SPEC, (long long)a.rows, (long long)a.cols, (long long)G, (long long)xs,
           (long long)ys, (long long)grs, offx, offy, force_any ? " forced any" : "", (unsigned long long)a.seed,
           (unsigned long long)a.offset);
  double mag = ldexp(1.0, (int)rnd_range(-8, 8));
  int kind = (int)(rnd() % 6);
  for (int64_t i = 0; i < nx; i++) {
    if (i % G == 0 && rnd() % 4 == 0) kind = (int)(rnd() % 6), mag = ldexp(1.0, (int)rnd_range(-8, 8));
    store_any(T, x, i, value(kind, mag));
  }
  if (bwd)
    for (int64_t i = 0; i < ny; i++) store_any(T, y, i, value((int)(rnd() % 6), ldexp(1.0, (int)rnd_range(-8, 8))));
  else
    memset(yb.data(), 0x5A, yb.size());
  memset(dxb.data(), 0x5A, dxb.size());
  memset(sb.data(), 0xA5, sb.size());
  fill_scales(sc, nscale);
  float tsv = (float)ldexp(1.0 + rnd_unit(), (int)rnd_range(-12, 4));
  /* the mask's edge: now and then an element at exactly +-max times its group's scale, or
     the next value of T past it (where the scale is a power of two, both are exact) */
  for (int64_t r = 0; r < a.rows; r++)
    for (int64_t gi = 0; gi < ng; gi++)
      if (rnd() % 3 == 0) {
        const double v = MAXE * refmx_sc(&d, sc[refmx_scale_index(d.scale_layout, r, gi, ng, grs)], tsv);
        const int64_t i = r * xs + gi * G + rnd_range(0, G - 1);
        store_any(T, x, i, rnd() & 1 ? -v : v);
        if (rnd() & 1) { /* one ulp of T further out */
          const double w = T == BQ_F64 ? ref_load_d(T, x, i) : (double)ref_load_f(T, x, i);
          store_any(T, x, i, w * (1 + (T == BQ_F64 ? 0x1p-52 : T == BQ_F32 ? 0x1p-23 : T == BQ_F16 ? 0x1p-10 : 0x1p-7)));
        }
      }
  memcpy(eyb.data(), yb.data(), yb.size());
  memcpy(edxb.data(), dxb.data(), dxb.size());
  std::vector<unsigned char> esb(sb);
  if (NV) a.tensor_scale = &tsv;
  a.scales = sc;
  if (bwd) {
    a.dy = y;
    a.dx = dx;
    if (OP != BQ_DEQUANTIZE) a.x = x;
  } else {
    a.x = x;
    a.y = y;
  }
  g_last = NULL;
  cr_assert_eq(bq_plan_run(&plan, &a, NULL, 0, NULL), BQ_SUCCESS, "%s | %s", bq_last_error(), what);
  bq__mx_force_entry = -1;
  if (a.rows && a.cols) {
    const stream_geom st[3] = {{bwd ? y : x, (bwd ? ys : xs) * (int64_t)ts, 16}, {bwd ? dx : y, (bwd ? xs : ys) * (int64_t)ts, 16},
                               {x, xs * (int64_t)ts, 16}};
    const emu_kernel want = want_kernel(G, force_any, 0, st, bwd && OP != BQ_DEQUANTIZE ? 3 : 2);
    cr_assert(g_last == want, "the group kernel launched is not the one for G %lld | %s", (long long)G, what);
    g_lanes_runs += want == (emu_kernel)klanes;
  }
  unsigned char *ey = eyb.data() + guard + (size_t)offy * ts, *edx = edxb.data() + guard + (size_t)offx * ts;
  refmx_op_sr(&d, a.rows, a.cols, G, xs, ys, grs, x, bwd ? NULL : (void *)ey, bwd ? (const void *)ey : NULL,
              bwd ? (void *)edx : NULL, esb.data() + guard, tsv, 0, a.seed, a.offset);
  char msg[2048];
  const std::vector<unsigned char> &got = bwd ? dxb : yb, &want = bwd ? edxb : eyb;
  size_t bad = ref_compare(T, want.data(), got.data(), (int64_t)(got.size() / ts), msg, sizeof msg);
  cr_assert_eq(bad, 0, "%s: %zu differ (index from the buffer's start, guard %zu):\n%s| %s", bwd ? "dx" : "y", bad, guard,
               msg, what);
  cr_assert(!memcmp(sb.data(), esb.data(), sb.size()), "the scales were written | %s", what);
  if (bwd) cr_assert(!memcmp(yb.data(), eyb.data(), yb.size()), "dy was written | %s", what);
}

/* dynamic quantize: 65536 groups of random data, where a rule's step order shows in the
   rare group whose rounding it changes (each step order of the NVFP4 rules, say) */
Test(emulated_mx, many_groups, .timeout = 600) {
  if (OP == BQ_DYNAMIC_QUANTIZE) one_case(1000);
}

Test(emulated_mx, shapes, .timeout = 600) {
  g_lanes_runs = 0;
  for (int rep = 0; rep < 48; rep++) {
    if (OP == BQ_FAKE_QUANTIZE || EMU_BWD) one_case_t(rep);
    else one_case(rep);
  }
  cr_assert(g_lanes_runs > 0, "no case ran bq_mx_lanes | seed=0x%llx %s", (unsigned long long)g_seed, EMU_SPEC);
}

/* The kernels' E2M1 conversion from f32 (bq_mx_elem_of, the bit form) on every f32 pattern
   against the reference's (tests/reference_fp4.h), in one build of the suite (f32 data,
   E2M1 with UE8M0 scales, dynamic quantize into the blocked layout, neither stochastic
   rounding nor the rotation: the same function there); test_gpu_mx runs the same check on
   the GPU. */
Test(emulated_mx, e2m1_every_f32, .timeout = 600) {
#if EMU_T == BQ_TYPE_F32 && EMU_I == BQ_TYPE_E2M1 && EMU_ST == BQ_TYPE_UE8M0 && EMU_LAYOUT == 2 && \
    EMU_OP == BQ_OP_DYNAMIC_QUANTIZE && !EMU_SR && !EMU_ROT
  uint64_t bad = 0;
  uint32_t first = 0;
  for (uint64_t i = 0; i < (1ull << 32); i++) {
    const uint32_t u = (uint32_t)i;
    float f;
    memcpy(&f, &u, 4);
    if ((uint8_t)emu_mx::bq_mx_elem_of(f) != ref_e2m1_from_f32_bits(u) && !bad++) first = u;
  }
  cr_assert_eq(bad, 0, "%llu f32 patterns differ, the first 0x%08x", (unsigned long long)bad, first);
#endif
}

/* MXFP4 from bf16 or f16 two elements a step (bq_e2m1_pair, packed half arithmetic): every
   pattern of the type in each half, against the pattern beside it, times the reciprocal of
   every UE8M0 scale the pair form takes (a reciprocal that is a normal of the type, or NaN:
   bf16 all but 254, f16 112 to 141 and 255), against the reference's E2M1 conversion of the
   exact product (x rcp in f32 is that, or below the type's smallest normal, or past its
   largest finite, which round alike) and NaN's code for the scale 255; in the builds of
   that form */
Test(emulated_mx, e2m1_half_pairs, .timeout = 600) {
#if (EMU_T == BQ_TYPE_BF16 || EMU_T == BQ_TYPE_F16) && EMU_I == BQ_TYPE_E2M1 && EMU_ST == BQ_TYPE_UE8M0 && \
    !EMU_SR && !EMU_BWD && (EMU_OP == BQ_OP_QUANTIZE || EMU_OP == BQ_OP_DYNAMIC_QUANTIZE)
  const int bf16 = EMU_T == BQ_TYPE_BF16;
  uint64_t bad = 0;
  int codes = 0;
  char first[160] = "";
  for (int code = 0; code < 256; code++) {
    const float rcp = emu_mx::bq_ue8m0_f32(code == 255 ? 255 : 254 - code);
    if (rcp < BQ_H2_MIN || rcp > BQ_H2_MAX) continue;
    codes++;
    const uint32_t r2 = (bf16 ? __float_as_uint(rcp) >> 16 : (uint32_t)ref_f32_to_f16(rcp)) * 0x10001u;
    for (uint32_t x = 0; x < 65536; x++) {
      const uint32_t y = (x * 40503u + (uint32_t)code * 977u) & 0xffffu; /* a partner pattern */
      const uint32_t got = emu_mx::bq_e2m1_pair(x | y << 16, r2);
      for (int h = 0; h < 2; h++) {
        const uint16_t b = (uint16_t)(h ? y : x);
        const double v = (double)(bf16 ? ref_bf16_to_f32(b) : ref_f16_to_f32(b)) *
                         (code == 255 ? NAN : ldexp(1.0, 127 - code));
        const uint32_t want = ref_e2m1_from_double(v), g = (got >> (16 * h)) & 0xffffu;
        if (g != want && !bad++)
          snprintf(first, sizeof first, "%s 0x%04x, scale code %d: 0x%x, expected 0x%x", bf16 ? "bf16" : "f16", b,
                   code, g, want);
      }
    }
  }
  cr_assert_eq(codes, bf16 ? 255 : 31, "scale codes the pair form takes: %d", codes);
  cr_assert_eq(bad, 0, "%llu codes differ, the first: %s", (unsigned long long)bad, first);
#endif
}

/* NVFP4 from bf16 or f16 two elements a step (bq_nv_pairs: thresholds on |x| for the
   library's rule): every pattern of the type, eight a call, under scales s of the form's range
   (every positive E4M3 code times the tensor scale 1, where quotients land exactly on the
   midpoints, and times one drawn from 2^-40, 2^40 and a random one; 24 whole random f32
   scales across [2^-90, 2^90], and its ends), against the reference's E2M1 code of the f32
   quotient x / s; in the builds of that form (test_gpu_mx takes all four tensor scales) */
Test(emulated_mx, nv_half_pairs, .timeout = 600) {
#if (EMU_T == BQ_TYPE_BF16 || EMU_T == BQ_TYPE_F16) && EMU_I == BQ_TYPE_E2M1 && EMU_ST == BQ_TYPE_E4M3 && \
    EMU_RULE == 0 && !EMU_SR && !EMU_BWD && (EMU_OP == BQ_OP_QUANTIZE || EMU_OP == BQ_OP_DYNAMIC_QUANTIZE)
  const int bf16 = EMU_T == BQ_TYPE_BF16;
  std::vector<float> sc;
  const float gs[3] = {0x1p-40f, 0x1p40f, (float)ldexp(1.0 + rnd_unit(), (int)rnd_range(-30, 30))};
  const float g = gs[rnd() % 3];
  for (int k = 0; k < 2; k++)
    for (int code = 1; code < 0x7f; code++) {
      volatile float t = (k ? g : 1.0f) * refmx_e4m3_f32((uint8_t)code);
      sc.push_back((float)t);
    }
  for (int i = 0; i < 24; i++) sc.push_back((float)ldexp(1.0 + rnd_unit(), (int)rnd_range(-90, 89)));
  sc.push_back(0x1p-90f), sc.push_back(0x1.fffffep89f), sc.push_back(0x1p90f);
  uint64_t bad = 0;
  char first[160] = "";
  for (const float s : sc) {
    for (uint32_t x0 = 0; x0 < 65536; x0 += 8) {
      emu_mx::bq_chunk<emu_mx::bq_t, 8> v;
      emu_mx::bq_chunk<unsigned char, 4> c;
      const uint32_t y0 = (x0 * 40503u + __float_as_uint(s)) & 0xfff8u; /* other patterns beside */
      uint16_t b[8];
      for (int j = 0; j < 8; j++) b[j] = (uint16_t)(j & 1 ? y0 + j : x0 + j);
      memcpy(v.e, b, sizeof b);
      emu_mx::bq_nv_pairs<8>(v, s, c);
      for (int j = 0; j < 8; j++) {
        volatile float q = (bf16 ? ref_bf16_to_f32(b[j]) : ref_f16_to_f32(b[j])) / s;
        const unsigned want = refmx_code(BQ_E2M1, (double)q), got = (c.e[j >> 1] >> (4 * (j & 1))) & 15u;
        if (got != want && !bad++)
          snprintf(first, sizeof first, "%s 0x%04x, scale %a: 0x%x, expected 0x%x", bf16 ? "bf16" : "f16", b[j],
                   (double)s, got, want);
      }
    }
  }
  cr_assert_eq(bad, 0, "%llu codes differ, the first: %s | drawn tensor scale %a, seed=0x%llx", (unsigned long long)bad,
               first, (double)g, (unsigned long long)g_seed);
#endif
}

/* Stochastic rounding's element rounding (bq_mx_elem_sr) on random values of C (f32 bit
   patterns of every class, or f64 ones) and random draws, the draw's ends among them,
   against the reference's refmx_code_sr */
Test(emulated_mx, sr_element, .timeout = 600) {
#if EMU_SR && !(EMU_OP == BQ_OP_DEQUANTIZE || EMU_BWD)
  uint64_t bad = 0;
  char first[160] = "";
  for (int i = 0; i < (1 << 22); i++) {
    const unsigned u = i % 7 == 0 ? 0u : i % 7 == 1 ? 0xffffu : (unsigned)(rnd() & 0xffff);
    double v;
    int got;
    if (i % 7 == 2) { /* exactly where the draw u decides: (n + (u + 1/2) 2^-16) q */
      const refmx_fmt fm = refmx_fmt_of(I);
      const int emin = E2M1 ? 0 : EMU_I == BQ_TYPE_E4M3 ? -6 : -14, e = (int)rnd_range(emin, fm.emax);
      const double n = (double)rnd_range(e == emin ? 0 : 1 << fm.mbits, (2 << fm.mbits) - 1);
      v = (rnd() & 1 ? -1 : 1) * ldexp(n + (u + 0.5) * 0x1p-16, e - fm.mbits);
      if (!(fabs(v) < fm.max)) v = 0.5;
      got = T == BQ_F64 ? emu_mx::bq_mx_elem_sr(v, u) : emu_mx::bq_mx_elem_sr((float)v, u);
    } else if (T == BQ_F64) {
      /* magnitudes around the element grid (and now and then any pattern) */
      uint64_t b = rnd();
      if (i % 4) b = (b & 0x800fffffffffffffull) | (uint64_t)(1023 + rnd_range(-30, 20)) << 52;
      memcpy(&v, &b, 8);
      got = emu_mx::bq_mx_elem_sr(v, u);
    } else {
      uint32_t b = (uint32_t)rnd();
      if (i % 4) b = (b & 0x807fffffu) | (uint32_t)(127 + rnd_range(-30, 20)) << 23;
      float f;
      memcpy(&f, &b, 4);
      v = f;
      got = emu_mx::bq_mx_elem_sr(f, u);
    }
    const int want = refmx_code_sr(I, v, u);
    if (got != want && !bad++) snprintf(first, sizeof first, "v %a u 0x%04x: 0x%x, expected 0x%x", v, u, got, want);
  }
  cr_assert_eq(bad, 0, "%llu values differ, the first %s | seed=0x%llx %s", (unsigned long long)bad, first,
               (unsigned long long)g_seed, EMU_SPEC);
#endif
}

/* Stochastic rounding is batch invariant: each row quantized by a call of its own (x and y
   at the row, offset advanced by the rows before it, its scales gathered into a one-row
   layout) gives the bits the whole call gives, scales included */
Test(emulated_mx, sr_rows_alone, .timeout = 600) {
#if EMU_SR && !(EMU_OP == BQ_OP_DEQUANTIZE || EMU_BWD)
  const int fake = OP == BQ_FAKE_QUANTIZE, dyn = OP == BQ_DYNAMIC_QUANTIZE;
  const size_t ts = ref_dtype_size(T);
  for (int rep = 0; rep < 12; rep++) {
    bq_desc d;
    bq_plan plan;
    plan_of(&d, &plan, rep);
    const int E = 16 / (int)ts;
    const int64_t G = rep % 2 || EMU_ROT ? (int64_t)E << rnd_range(0, 3) : rep % 4 == 2 ? 48 : NV ? 16 : 32;
    const int64_t rot_n = EMU_ROT ? 2 << rnd_range(0, refmx_rot_max_shift(E)) : 1; /* (2 to 32 E) */
    const int64_t rows = rnd_range(2, 9), cols = G * rot_n * rnd_range(1, 6), ng = cols / G;
    bq_args a;
    memset(&a, 0, sizeof a);
    a.group_size = G, a.rows = rows, a.cols = cols, a.rotation_block = EMU_ROT ? rot_n : 0;
    draw_sr(&a);
    float tsv = (float)ldexp(1.0 + rnd_unit(), (int)rnd_range(-12, 4));
    if (NV) a.tensor_scale = &tsv;
    std::vector<unsigned char> x((size_t)(rows * cols) * ts + 16);
    unsigned char *xp = (unsigned char *)(((uintptr_t)x.data() + 15) & ~(uintptr_t)15);
    const double mag = ldexp(1.0, (int)rnd_range(-8, 8));
    for (int64_t i = 0; i < rows * cols; i++) store_any(T, xp, i, value(rnd() % 3 ? 5 : (int)(rnd() % 6), mag));
    const size_t row_bytes = fake ? (size_t)cols * ts : E2M1 ? (size_t)cols / 2 : (size_t)cols;
    std::vector<unsigned char> y1(row_bytes * (size_t)rows + 16, 0x5A), y2(y1.size(), 0xA5);
    unsigned char *y1p = (unsigned char *)(((uintptr_t)y1.data() + 15) & ~(uintptr_t)15);
    unsigned char *y2p = y1p - y1.data() + y2.data();
    const int64_t grs = refmx_default_grs(d.scale_layout, rows, ng), grs1 = refmx_default_grs(d.scale_layout, 1, ng);
    std::vector<unsigned char> s((size_t)refmx_scale_bytes(d.scale_layout, rows, ng, grs) + 1, 0x77);
    std::vector<unsigned char> s1((size_t)refmx_scale_bytes(d.scale_layout, 1, ng, grs1) + 1);
    if (!dyn) fill_scales(s.data(), (int64_t)s.size() - 1);
    a.x = xp, a.y = y1p;
    if (dyn) a.out_scales = s.data();
    else a.scales = s.data();
    char what[300];
    snprintf(what, sizeof what, "seed=0x%llx %s | [%lld,%lld] G %lld sr %llx+%llu", (unsigned long long)g_seed,
             EMU_SPEC, (long long)rows, (long long)cols, (long long)G, (unsigned long long)a.seed,
             (unsigned long long)a.offset);
    cr_assert_eq(bq_plan_run(&plan, &a, NULL, 0, NULL), BQ_SUCCESS, "%s | %s", bq_last_error(), what);
    for (int64_t r = 0; r < rows; r++) {
      bq_args b = a;
      b.rows = 1;
      b.x = xp + (size_t)(r * cols) * ts;
      b.y = y2p + row_bytes * (size_t)r;
      b.offset = a.offset + (uint64_t)(r * cols);
      memset(s1.data(), 0x33, s1.size());
      if (!dyn)
        for (int64_t g = 0; g < ng; g++)
          s1[(size_t)refmx_scale_index(d.scale_layout, 0, g, ng, grs1)] =
              s[(size_t)refmx_scale_index(d.scale_layout, r, g, ng, grs)];
      if (dyn) b.out_scales = s1.data();
      else b.scales = s1.data();
      cr_assert_eq(bq_plan_run(&plan, &b, NULL, 0, NULL), BQ_SUCCESS, "%s | %s", bq_last_error(), what);
      for (int64_t g = 0; dyn && g < ng; g++)
        cr_assert_eq(s1[(size_t)refmx_scale_index(d.scale_layout, 0, g, ng, grs1)],
                     s[(size_t)refmx_scale_index(d.scale_layout, r, g, ng, grs)], "row %lld group %lld's scale | %s",
                     (long long)r, (long long)g, what);
    }
    cr_assert(!memcmp(y1p, y2p, row_bytes * (size_t)rows), "rows alone differ from the whole call | %s", what);
  }
#endif
}
