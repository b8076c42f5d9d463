/* tests/test_fused_emulated.cpp - kernels_src/fused.cu (the fused producers: (residual add
   +) RMSNorm or act(gate) * up, then quantize per tensor, per token or per group) run on
   the CPU by tests/emulator/cuda_emulator.h through the header's own run path, against the
   CPU reference (tests/reference_fused.h) bit for bit: integers, scales, zero points, the
   residual buffer (h) and args.out, NaN payloads aside in the float outputs. A host test,
   so that CI checks the kernel's logic (the register entries and the long one, the shuffle
   and generic group paths, element loads of misaligned rows, the residual in place) on
   every change; test_gpu_fused is the real thing. Microscaling specializations (E2M1,
   UE8M0 or NVFP4's E4M3 scales, any layout and rule) are checked against the producer's
   reference followed by reference_mxops.h's dynamic quantize: codes, every scale byte (the
   blocked layout's padding too) and NVFP4's computed tensor scale. Built once per specialization
   (tests/meson.build names it; tests/emu_spec.c writes the header EMU_SPEC). Outputs are
   poisoned and compared whole, guards and row gaps included. Small shapes: the emulator
   is slow. */
#include <emu_prefix.h> /* the header, references, emulator and Criterion: precompiled */
#include "reference_fused.h"
#include "reference_mxops.h"

#include "emulator/cuda_emulator.h"

/* the specialization: EMU_* and the host's prelude, from tests/emu_spec.c (meson) */
#include EMU_SPEC
namespace emu_fused {
#define EMU_SECTION 1
#include EMU_SPEC
#undef EMU_SECTION
#include "../kernels_src/common.cuh"
#include "../kernels_src/fused.cu"
#include "emulator/kernel_undefs.h"
} // namespace emu_fused

#include <criterion/criterion.h>

#include "emulator/emu_test.h"

#include <time.h>

#include <vector>


typedef bq_fused_params fparams;
static void k0(const void *p) { emu_fused::bq_fused_c1(*(const fparams *)p); }
static void k1(const void *p) { emu_fused::bq_fused_c2(*(const fparams *)p); }
static void k2(const void *p) { emu_fused::bq_fused_c4(*(const fparams *)p); }
static void k3(const void *p) { emu_fused::bq_fused_c8(*(const fparams *)p); }
static void k4(const void *p) { emu_fused::bq_fused_long(*(const fparams *)p); }
static void k5(const void *p) { emu_fused::bq_fused_staged(*(const fparams *)p); }
static void k6(const void *p) { emu_fused::bq_fused_m4(*(const fparams *)p); }
static void k7(const void *p) { emu_fused::bq_fused_m8(*(const fparams *)p); }
static void k8(const void *p) { emu_fused::bq_fused_m4f(*(const fparams *)p); }
static void k9(const void *p) { emu_fused::bq_fused_m8f(*(const fparams *)p); }
static void k10(const void *p) { emu_fused::bq_fused_m16(*(const fparams *)p); }
static void k11(const void *p) { emu_fused::bq_fused_c2d(*(const fparams *)p); }
static void k12(const void *p) { emu_fused::bq_fused_c8d(*(const fparams *)p); }
static void k13(const void *p) { emu_fused::bq_fused_amax(*(const fparams *)p); }
static const emu_kernel g_kernels[BQ__FUSED_ENTRIES] = {k0, k1, k2, k3, k4, k5, k6, k7, k8, k9, k10, k11, k12, k13};
/* the rows an entry holds in registers (0: bq_fused_long and bq_fused_staged, any) */
static int64_t held_accesses(int e) {
  return e == BQ__FUSED_LONG || e == BQ__FUSED_STAGED ? 0 : bq__fused_held(e);
}
static int entry_of(emu_kernel k) {
  for (int e = 0; e < BQ__FUSED_ENTRIES; e++)
    if (g_kernels[e] == k) return e;
  return -1;
}

static emu_kernel g_last; /* the last kernel launched */
static unsigned g_last_block, g_last_grid, g_last_smem;
static void note_kernel(emu_kernel k, unsigned gx, unsigned gy, unsigned bx, unsigned smem) {
  (void)gy;
  g_last = k;
  g_last_block = bx;
  g_last_grid = gx;
  g_last_smem = smem;
}
/* gated with bf16 gates: the activation's table takes the first BQ__FUSED_ACT_BYTES of
   shared memory */
#define EMU_TAB (EMU_OP != BQ_OP_RMSNORM_QUANTIZE && EMU_T == BQ_BF16)
/* the rows that bq_fused_c8 takes in place of the staged kernel: the table's, and 16-bit
   RMSNorm per token or per group with a residual (the host's rule, restated) */
static int reg_c8(int64_t nacc, int res) {
  const int rms_res = EMU_OP == BQ_OP_RMSNORM_QUANTIZE && res && sizeof(emu_fused::bq_t) == 2 &&
                      (EMU_GRAN == BQ_GRAN_TOKEN || EMU_GRAN == BQ_GRAN_GROUP);
  return (EMU_TAB || rms_res) && nacc > 1024 && nacc <= 2048;
}
/* bq_fused_staged's occupancy: one block an SM (so that a block takes many rows, each
   staged while the last is worked on), none when the slots do not fit */
#define EMU_SMEM_MAX (227 * 1024 - 1024) /* an H100's opt-in, less the host's margin */
static bq__CUresult emu_occupancy(int *n, bq__CUfunction f, int block, size_t smem) {
  cr_assert(f == (bq__CUfunction)k5 && block == 256, "occupancy asked of another kernel");
  *n = smem <= (size_t)EMU_SMEM_MAX ? 1 : 0;
  return 0;
}
static void init(void) {
  emu_test_init();
  emu_launch_check = note_kernel;
  bq__drv.cuOccupancyMaxActiveBlocksPerMultiprocessor = emu_occupancy;
}
TestSuite(emulated_fused, .init = init);

static const bq_dtype T = (bq_dtype)EMU_T, I = (bq_dtype)EMU_I;
/* a microscaling format (the fused producers emit one with UE8M0 or E4M3 scales alone) */
#define EMU_FMX (EMU_ST == BQ_TYPE_UE8M0 || EMU_ST == BQ_TYPE_E4M3)
#define EMU_NV (EMU_ST == BQ_TYPE_E4M3)
static const int E2M1 = EMU_I == BQ_TYPE_E2M1;
static const int RMS = EMU_OP == BQ_OP_RMSNORM_QUANTIZE;
static const int64_t V = 16 / (int64_t)sizeof(emu_fused::bq_t);

static bq_desc the_desc(void) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = RMS ? BQ_RMSNORM_QUANTIZE : BQ_GATED_QUANTIZE;
  d.activation = (bq_activation)EMU_ACT;
  d.granularity = (bq_granularity)EMU_GRAN;
  d.float_type = T;
  d.int_type = I;
  d.qmin = EMU_QMIN;
  d.qmax = EMU_QMAX;
  d.scale_type = (bq_dtype)EMU_ST;
  d.asymmetric = EMU_ASYM;
  d.scale_layout = (bq_scale_layout)EMU_LAYOUT;
  d.scale_rule = (bq_scale_rule)EMU_RULE;
  return d;
}

/* the reference's quantize half */
static bq_desc quant_desc(void) {
  bq_desc d = the_desc();
  d.op = EMU_GRAN == BQ_GRAN_TENSOR ? BQ_QUANTIZE : BQ_DYNAMIC_QUANTIZE;
  d.activation = BQ_ACTIVATION_DEFAULT;
  if (EMU_GRAN == BQ_GRAN_TENSOR) d.scale_type = BQ_DTYPE_DEFAULT;
  return refd_desc_normalize(&d);
}

/* a row's content: 0 random, 1 zeros, 2 one huge element, 3 NaN and inf sprinkled,
   4 wide (exp / tanh saturation), 5 constant */
static double value(int kind, double mag) {
  switch (kind) {
  case 1: return (rnd() & 1) ? 0.0 : -0.0;
  case 2: return rnd() % 97 == 0 ? (T == BQ_F16 ? 60000.0 : 1e30) : (rnd_unit() - 0.5) * mag;
  case 3: return rnd() % 13 == 0 ? NAN : rnd() % 17 == 0 ? ((rnd() & 1) ? INFINITY : -INFINITY) : (rnd_unit() - 0.5) * mag;
  case 4: return (2 * rnd_unit() - 1) * (T == BQ_F16 ? 20.0 : 120.0);
  case 5: return mag / 3;
  default: return (rnd_unit() - 0.5) * mag;
  }
}

struct fcase {
  int64_t rows, cols, xs, ys, rs, os, G, grs; /* strides: 0 = dense */
  int res;      /* 0 none, 1 a buffer, 2 in place (== x) */
  int with_out;
  int offx, offr, offo, offy; /* element offsets */
  int force;    /* bq__fused_force_entry */
  int sms;      /* the plan's SM count: bq_fused_staged's persistent grid (0: 132) */
  double eps;
};

/* a host buffer of `count` elements of es bytes with at least `guard` elements either side,
   the data at element offset `off` from a 16-byte boundary */
struct hbuf {
  std::vector<unsigned char> v;
  size_t es, pre;
  void init(size_t es_, int64_t count, int off, int64_t guard) {
    es = es_;
    pre = ((size_t)guard * es + 15) / 16 * 16 + (size_t)off * es; /* off 0: 16-byte aligned */
    v.assign(pre + (size_t)(count + guard) * es + 16, 0);
  }
  unsigned char *base() { return (unsigned char *)(((uintptr_t)v.data() + 15) & ~(uintptr_t)15); }
  unsigned char *data() { return base() + pre; }
  size_t total() const { return v.size() - 16; }
};

static void garbage(unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)rnd();
}

/* Runs one case through bq_plan_run (the emulator) and compares everything with the reference. */
static void run(const fcase &c, const char *label) {
  char what[512];
  const int64_t D = c.cols, in_cols = RMS ? D : 2 * D;
  const int64_t xs = c.xs ? c.xs : in_cols, ys = c.ys ? c.ys : D, os = c.os ? c.os : D;
  const int res = RMS ? c.res : 0;
  const int64_t rs = res == 2 ? xs : c.rs ? c.rs : D;
  const int64_t ng = EMU_GRAN == BQ_GRAN_GROUP ? D / c.G : 0;
#if EMU_FMX /* the layout's leading dimension: c.grs's slack over the least one (blocked: none) */
  const bq_scale_layout lay = (bq_scale_layout)EMU_LAYOUT;
  const int64_t grs0 = refmx_default_grs(lay, c.rows, ng);
  const int64_t grs_arg = lay == BQ_SCALES_BLOCKED || !c.grs ? 0 : lay == BQ_SCALES_MN_MAJOR ? c.rows + (c.grs - ng) : c.grs;
  const int64_t grs = grs_arg ? grs_arg : grs0;
  const int64_t np = refmx_scale_bytes(lay, c.rows, ng, grs);
#else
  const int64_t grs_arg = c.grs, grs = c.grs ? c.grs : ng;
  const int64_t np = EMU_GRAN == BQ_GRAN_GROUP ? c.rows * grs : EMU_GRAN == BQ_GRAN_TOKEN ? c.rows : 0;
#endif
  const double scale = ldexp(1.0 + rnd_unit(), -(int)rnd_range(3, 8));
  const int32_t zp = (int32_t)rnd_range(EMU_QMIN, EMU_QMAX);
  snprintf(what, sizeof what,
           "seed=0x%llx %s | %s: [%lld,%lld] strides x %lld y %lld res %lld out %lld | G %lld grs %lld | residual %s "
           "out %s | offs %d/%d/%d/%d | eps %g | force %d",
           (unsigned long long)g_seed, EMU_SPEC, label, (long long)c.rows, (long long)D, (long long)c.xs,
           (long long)c.ys, (long long)(res == 2 ? xs : c.rs), (long long)c.os, (long long)c.G, (long long)c.grs,
           res == 0 ? "none" : res == 1 ? "buffer" : "in place", c.with_out ? "set" : "NULL", c.offx, c.offr, c.offo,
           c.offy, c.eps, c.force);
  bq_desc d = the_desc();
  bq_plan plan;
  cr_assert_eq(bq__plan_init(&d, &plan), BQ_SUCCESS, "%s", bq_last_error());
  (void)scale, (void)zp;
  bq__target tg = {90, 0, 0, 0};
  bq__kernel_src ks;
  cr_assert_eq(bq__kernel_for(&d, &tg, &ks), BQ_SUCCESS);
  cr_assert(strstr(ks.source.p, EMU_PRELUDE), "the SKU's prelude differs from this build's: %s", what);
  free(ks.source.p);
  bq__entry entry;
  memset(&entry, 0, sizeof entry);
  for (int e = 0; e < BQ__FUSED_ENTRIES; e++) entry.fn[e] = (bq__CUfunction)g_kernels[e];
  for (int e = 0; e < BQ__MAX_KERNELS; e++) plan.mod[e] = &entry;
  plan.num_sms = c.sms ? c.sms : 132;
  plan.fused.smem_max = plan.fused.staged_smem = EMU_SMEM_MAX; /* (what bq__fused_setup gives bq_fused_staged) */
  /* with the table, what select would find: two blocks an SM for each register entry, so
     that a block takes several rows */
  for (int e = 0; e < BQ__FUSED_ENTRIES && EMU_TAB; e++) plan.fused.tab_blocks[e] = 2;

  const size_t ts = ref_dtype_size(T), ss = EMU_FMX ? 1 : ref_dtype_size(quant_desc().scale_type);
  const int64_t guard = 19;
  hbuf x, r, w, o, y, s, z;
  x.init(ts, c.rows * xs, c.offx, guard);
  r.init(ts, res == 1 ? c.rows * rs : 0, c.offr, guard);
  w.init(ts, D, 0, guard);
  o.init(ts, c.with_out ? c.rows * os : 0, c.offo, guard);
  y.init(1, E2M1 ? c.rows * ys / 2 : c.rows * ys, c.offy, guard);
  s.init(ss, np, 0, guard);
  z.init(4, np, 0, guard);
  garbage(x.base(), x.total());
  garbage(r.base(), r.total());
  garbage(w.base(), w.total());
  for (int64_t row = 0; row < c.rows; row++) {
    int kind = (int)(rnd() % 6);
    double mag = ldexp(1.0, (int)rnd_range(-4, 4));
    for (int64_t i = 0; i < in_cols; i++) store_any(T, x.data(), row * xs + i, value(kind, mag));
    if (res == 1)
      for (int64_t i = 0; i < D; i++) store_any(T, r.data(), row * rs + i, value(kind == 1 ? 1 : 0, mag));
  }
  for (int64_t i = 0; i < D; i++) store_any(T, w.data(), i, rnd() % 16 == 0 ? 0.0 : 4 * rnd_unit() - 2);
  /* the expected images: copies of the inputs, poisoned outputs */
  hbuf ex = x, er = r, eo = o, ey = y, es = s, ez = z;
  memset(o.base(), 0xA5, o.total());
  memset(eo.base(), 0xA5, eo.total());
  memset(y.base(), 0xA5, y.total());
  memset(ey.base(), 0xA5, ey.total());
  memset(s.base(), 0xA5, s.total());
  memset(es.base(), 0xA5, es.total());
  memset(z.base(), 0xA5, z.total());
  memset(ez.base(), 0xA5, ez.total());
  const std::vector<unsigned char> w0 = w.v;

  reff_producer p;
  memset(&p, 0, sizeof p);
  p.kind = RMS ? REFF_RMSNORM : EMU_ACT == BQ_GELU_TANH ? REFF_GELU_TANH_MUL : REFF_SILU_MUL;
  p.T = T;
  p.rows = c.rows;
  p.cols = D;
  p.x = ex.data();
  p.x_row_stride = xs;
  p.residual = res == 1 ? er.data() : res == 2 ? ex.data() : NULL;
  p.residual_row_stride = rs;
  p.weight = w.data();
  p.eps = c.eps;
  p.out = c.with_out ? eo.data() : NULL;
  p.out_row_stride = os;
#if EMU_FMX
  /* NVFP4: the tensor scale given, or computed (then written to out_tensor_scale) */
  float tsv = (float)ldexp(1.0 + rnd_unit(), (int)rnd_range(-12, 2)), tso = NAN, etso = NAN;
  const int computed = EMU_NV && rnd() % 2;
  bq_desc md = the_desc(); /* the reference's quantize half: microscaling dynamic quantize */
  md.op = BQ_DYNAMIC_QUANTIZE;
  md.activation = BQ_ACTIVATION_DEFAULT;
  md.granularity = BQ_PER_GROUP;
  {
    std::vector<unsigned char> dense((size_t)(c.rows * D) * ts + 1);
    cr_assert_eq(reff_produce(&p, dense.data()), 0, "reference refused | %s", what);
    etso = refmx_op(&md, c.rows, D, c.G, D, ys, grs, dense.data(), ey.data(), NULL, NULL, es.data(),
                    computed ? NAN : tsv, 0);
  }
  const bq_desc qd = md;
#else
  bq_desc qd = quant_desc();
  bq_args qa;
  memset(&qa, 0, sizeof qa);
  qa.y = ey.data();
  qa.y_row_stride = ys;
  qa.out_scales = np ? es.data() : NULL;
  qa.out_zero_points = np && EMU_ASYM ? (int32_t *)(void *)ez.data() : NULL;
  qa.group_size = c.G;
  qa.group_row_stride = c.grs;
  qa.scale = scale;
  qa.zero_point = zp;
  cr_assert_eq(reff_fused_quantize(&p, &qd, &qa), 0, "reference refused | %s", what);
#endif

  bq_args a;
  memset(&a, 0, sizeof a);
  a.rows = c.rows;
  a.cols = D;
  a.x = x.data();
  a.x_row_stride = c.xs;
  a.y = y.data();
  a.y_row_stride = c.ys;
  a.residual = res == 1 ? (void *)r.data() : res == 2 ? (void *)x.data() : NULL;
  a.residual_row_stride = res == 2 ? c.xs : c.rs;
  a.norm_weight = RMS ? w.data() : NULL;
  a.eps = RMS ? c.eps : 0.0;
  a.out = c.with_out ? o.data() : NULL;
  a.out_row_stride = c.os;
  a.out_scales = np ? s.data() : NULL;
  a.out_zero_points = np && !EMU_FMX && (EMU_ASYM || rnd() % 2) ? (int32_t *)(void *)z.data() : NULL;
  a.group_size = c.G;
  a.group_row_stride = grs_arg;
  a.scale = EMU_FMX ? 0.0 : scale;
  a.zero_point = EMU_FMX ? 0 : zp;
  int amax_launches = 0;
#if EMU_FMX
  if (EMU_NV && !computed) a.tensor_scale = &tsv;
  if (computed) a.out_tensor_scale = &tso;
  amax_launches = computed && c.rows && D ? 2 : 0;
#endif
  size_t ws_bytes = 1;
  cr_assert_eq(bq_plan_workspace_size(&plan, &a, &ws_bytes), BQ_SUCCESS, "%s | %s", bq_last_error(), what);
  cr_assert_eq(ws_bytes, amax_launches ? (size_t)(c.rows < 8 * plan.num_sms ? c.rows : 8 * plan.num_sms) * 4 + 4 : 0,
               "%s", what);
  std::vector<unsigned char> wsb(ws_bytes + 16, 0xEE); /* (garbage: the amax passes write before they read) */
  void *ws = ws_bytes ? (void *)(((uintptr_t)wsb.data() + 15) & ~(uintptr_t)15) : NULL;
  g_launches = 0;
  g_last = NULL;
  bq__fused_force_entry = c.force;
  bq_status st = bq_plan_run(&plan, &a, ws, ws_bytes, NULL);
  bq__fused_force_entry = -1;
  cr_assert_eq(st, BQ_SUCCESS, "%s | %s", bq_last_error(), what);
  cr_assert(c.rows == 0 || D == 0 ||
                (g_launches == 1 + amax_launches && entry_of(g_last) >= 0 && entry_of(g_last) != BQ__FUSED_AMAX &&
                 (int)g_last_block == bq__fused_shapes[entry_of(g_last)][0]),
            "%d launches, block %u | %s", g_launches, g_last_block, what);
#if EMU_FMX
  if (computed && c.rows && D)
    cr_assert(!memcmp(&tso, &etso, 4), "tensor scale %a, expected %a | %s", (double)tso, (double)etso, what);
#endif

  char msg[2048];
  size_t bad = ref_compare(E2M1 ? BQ_U8 : I, ey.base(), y.base(), (int64_t)y.total(), msg, sizeof msg); /* (E2M1: bytes) */
  cr_assert_eq(bad, 0, "y: %zu bytes differ (index from the buffer's start, data at %zu):\n%s| %s", bad, y.pre, msg,
               what);
  if (np) {
    bad = ref_compare(EMU_FMX ? BQ_U8 : qd.scale_type, es.base(), s.base(), (int64_t)(s.total() / ss), msg, sizeof msg);
    cr_assert_eq(bad, 0, "scales: %zu differ (element index from the buffer's start, data at %zu):\n%s| %s", bad,
                 s.pre / ss, msg, what);
    cr_assert(!memcmp(z.base(), ez.base(), z.total()), "zero points differ | %s", what);
  }
  if (c.with_out) {
    bad = ref_compare(T, eo.base(), o.base(), (int64_t)(o.total() / ts), msg, sizeof msg);
    cr_assert_eq(bad, 0, "out: %zu differ (element index from the buffer's start, data at %zu):\n%s| %s", bad,
                 o.pre / ts, msg, what);
  }
  if (res == 1) {
    bad = ref_compare(T, er.base(), r.base(), (int64_t)(r.total() / ts), msg, sizeof msg);
    cr_assert_eq(bad, 0, "residual (h): %zu differ (element index from the buffer's start, data at %zu):\n%s| %s",
                 bad, r.pre / ts, msg, what);
  }
  if (res == 2) {
    bad = ref_compare(T, ex.base(), x.base(), (int64_t)(x.total() / ts), msg, sizeof msg);
    cr_assert_eq(bad, 0, "x == residual (h): %zu differ:\n%s| %s", bad, msg, what);
  } else {
    cr_assert(!memcmp(x.base(), ex.base(), x.total()), "x was written | %s", what);
  }
  cr_assert(w.v == w0, "norm_weight was written | %s", what);
}

static int64_t group_for(int64_t *cols) {
#if EMU_GRAN == BQ_GRAN_GROUP
  /* the shuffle path (G = gc V, gc a power of two <= 32) or the generic one */
  static const int64_t gcs[] = {1, 2, 4, 8, 32};
  int64_t G = rnd() % 3 ? V * gcs[rnd() % 5] : (rnd() & 1) ? 3 * V : rnd_range(1, 7);
  if (E2M1 && G % 2) G++; /* (E2M1 packs two elements a byte) */
  *cols = G * ((*cols + G - 1) / G);
  return G;
#else
  (void)cols;
  return 0;
#endif
}

Test(emulated_fused, shapes, .timeout = 600) {
  for (int rep = 0; rep < 120; rep++) {
    fcase c;
    memset(&c, 0, sizeof c);
    c.rows = rnd_range(1, 4);
    c.cols = rep < 40 ? rnd_range(1, 64) : rep < 100 ? rnd_range(65, 3000) : rnd_range(2048 * V - 8, 2048 * V + 300);
    c.G = group_for(&c.cols);
    if (c.G && rnd() % 2) c.grs = c.cols / c.G + rnd_range(1, 3);
    const int64_t in_cols = RMS ? c.cols : 2 * c.cols;
    c.xs = rnd() % 2 ? 0 : in_cols + rnd_range(0, 9) * (rnd() & 1 ? V : 1);
    c.ys = rnd() % 2 ? 0 : c.cols + rnd_range(0, 9) * (E2M1 ? 2 : 1); /* (E2M1 rows start on a byte) */
    c.rs = rnd() % 2 ? 0 : c.cols + rnd_range(0, 9);
    c.os = rnd() % 2 ? 0 : c.cols + rnd_range(0, 9) * (rnd() & 1 ? V : 1);
    c.res = (int)(rnd() % 3);
    c.with_out = (int)(rnd() % 2);
    c.offx = rnd() % 2 ? 0 : (int)rnd_range(0, V - 1);
    c.offr = rnd() % 2 ? 0 : (int)rnd_range(0, V - 1);
    c.offo = rnd() % 2 ? 0 : (int)rnd_range(0, V - 1);
    c.offy = (int)rnd_range(0, 15);
    c.force = rep % 5 == 4 ? 5 : rep % 5 == 2 ? BQ__FUSED_M4 + (int)(rnd() % 4) : -1; /* staged; a narrow entry */
    c.sms = rep % 3 == 0 ? 1 : rep % 3 == 1 ? 2 : 0;
    if (rep % 4 == 1) { /* aligned rows: the staged entry, a persistent block taking several */
      c.rows = rnd_range(3, 9);
      c.cols = V * rnd_range(1, 300);
      c.G = group_for(&c.cols);
      c.grs = 0;
      c.xs = c.ys = c.rs = c.os = 0;
      c.offx = c.offr = c.offo = 0;
    }
    c.eps = rep % 7 == 3 ? 0.0 : 1e-6;
    run(c, "shapes");
  }
}

/* every T stream's rows start 16-byte aligned (the host's k.aligned, restated) */
static int aligned(const fcase &c) {
  const int64_t t = (int64_t)sizeof(emu_fused::bq_t);
  const int64_t xs = c.xs ? c.xs : (RMS ? c.cols : 2 * c.cols), rs = c.res == 2 ? xs : c.rs ? c.rs : c.cols;
  const int64_t os = c.os ? c.os : c.cols;
  const int res = RMS && c.res;
  return c.offx * t % 16 == 0 && xs * t % 16 == 0 && (RMS || c.cols * t % 16 == 0) &&
         (!res || c.res == 2 || (c.offr * t % 16 == 0 && rs * t % 16 == 0)) &&
         (!c.with_out || (c.offo * t % 16 == 0 && os * t % 16 == 0));
}
/* bq_fused_staged serves a case when every stream is 16-byte aligned and two slots of the
   row fit (the host's rule, restated) */
static int staged_fits(const fcase &c) {
  const int64_t nacc = (c.cols + V - 1) / V, slot = nacc * 16 * (RMS && !c.res ? 1 : 2);
  return aligned(c) && (EMU_TAB ? BQ__FUSED_ACT_BYTES : 0) + 2 * slot <= EMU_SMEM_MAX;
}

/* dense rows: every stream 16-byte aligned, D a multiple of V, and y's rows aligned to a
   chunk of V codes; the narrow entries serve them (with a residual only bq_fused_m4 and
   bq_fused_m4f), and so does bq_fused_c2d (the host's rule, restated) */
static int whole(const fcase &c) { return aligned(c) && c.cols % V == 0; }
static int dense(const fcase &c) { return whole(c) && c.offy % V == 0 && (c.ys ? c.ys : c.cols) % V == 0; }
static int has_res(const fcase &c) { return RMS && c.res; }
/* the host's wide register entry for a row of nacc accesses: bq_fused_c2 gives dense rows
   to bq_fused_c2d, bq_fused_c8 rows of whole aligned accesses to bq_fused_c8d */
static int wide_entry(const fcase &c, int64_t nacc) {
  return nacc <= 256    ? BQ__FUSED_C1
         : nacc <= 512  ? (dense(c) ? BQ__FUSED_C2D : BQ__FUSED_C2)
         : nacc <= 1024 ? BQ__FUSED_C4
         : nacc <= 2048 ? (whole(c) ? BQ__FUSED_C8D : BQ__FUSED_C8)
                        : BQ__FUSED_LONG;
}

/* Every entry point by name (bq__fused_force_entry): rows each can hold (1, odd, exactly
   its threads times accesses) must launch that kernel; a row it cannot hold takes
   bq_fused_long, as does a row that is not dense for a narrow entry. */
Test(emulated_fused, by_name, .timeout = 600) {
  for (int e = 0; e < BQ__FUSED_AMAX; e++) { /* (bq_fused_amax: NVFP4's first launches, never a row's) */
    const int64_t held = held_accesses(e);
    const int64_t cap = held ? held * V : e == 4 ? 2048 * V + 3 * V : (EMU_SMEM_MAX / 64) * V;
    const int64_t lens[] = {1, V * 3 + 1, cap - 1, cap, cap + V + 1};
    for (int li = 0; li < 5; li++) {
      if (e == 4 && li == 4) continue;
      fcase c;
      memset(&c, 0, sizeof c);
      c.rows = li < 2 ? 3 : 1;
      if (e == 5) c.rows = li < 2 ? 7 : 2;
      c.cols = lens[li];
      if (e >= BQ__FUSED_M4 && li < 2) c.cols = (c.cols + V - 1) / V * V; /* dense, for a narrow entry */
      c.G = group_for(&c.cols);
      if (EMU_GRAN == BQ_GRAN_GROUP && held && li < 4 && (c.cols + V - 1) / V > held && c.cols > c.G) c.cols -= c.G;
      c.xs = li == 2 ? (RMS ? c.cols : 2 * c.cols) + 3 : 0;
      c.offx = li == 1 ? 1 % (int)V : 0;
      c.res = (int)(li % 3);
      if ((e == BQ__FUSED_C2D || e == BQ__FUSED_C8D || e == BQ__FUSED_M4 || e == BQ__FUSED_M4F) && li == 3)
        c.res = 1 + (int)(rnd() % 2); /* dense, a residual */
      c.with_out = li & 1;
      c.force = e;
      c.sms = e == 5 ? 1 + (int)(rnd() % 2) : 0;
      c.eps = 1e-5;
      char label[64];
      snprintf(label, sizeof label, "entry %d, %s", e, li == 4 ? "too long: falls back to long" : "fits");
      run(c, label);
      const int64_t nacc = (c.cols + V - 1) / V;
      const int want = e == 5                            ? (staged_fits(c) ? 5 : 4)
                       : e == 4 || nacc > held             ? 4
                       : e >= BQ__FUSED_M4 && e <= BQ__FUSED_M16 && !dense(c) ? 4
                       : e >= BQ__FUSED_M8 && e <= BQ__FUSED_M16 && e != BQ__FUSED_M4F && has_res(c) ? 4
                       : (e == BQ__FUSED_C2D && !dense(c)) || (e == BQ__FUSED_C8D && !whole(c)) ? 4
                       : (e == BQ__FUSED_M4F || e == BQ__FUSED_M8F) && nacc != held ? 4
                                                           : e;
      cr_assert(g_last == g_kernels[want], "%s: cols %lld took another kernel than entry %d (seed 0x%llx)", label,
                (long long)c.cols, want, (unsigned long long)g_seed);
    }
  }
  /* and the host's own choice: bq_fused_staged for aligned rows of more than 512 accesses
     whose two slots fit, else
     the smallest register entry that holds the row, else bq_fused_long */
  static const int64_t accs[] = {1, 256, 257, 512, 513, 1024, 1025, 2048, 2049, 3700, 7300};
  for (int i = 0; i < 11; i++)
    for (int al = 0; al < 2; al++) {
      fcase c;
      memset(&c, 0, sizeof c);
      c.rows = 2;
      c.cols = accs[i] * V;
      c.G = group_for(&c.cols);
      c.res = (int)(rnd() % 3);
      c.offx = al ? 0 : 1 % (int)V; /* misaligned x: never staged */
      c.force = -1;
      c.sms = 1;
      c.eps = 1e-6;
      run(c, al ? "host's choice, aligned" : "host's choice, misaligned");
      const int64_t nacc = (c.cols + V - 1) / V;
      const int want = staged_fits(c) && nacc > 512 && !reg_c8(nacc, c.res) ? 5 : wide_entry(c, nacc);
      cr_assert(g_last == g_kernels[want], "host's choice: %lld accesses (%s) took another kernel than %d (seed 0x%llx)",
                (long long)nacc, al ? "aligned" : "misaligned", want, (unsigned long long)g_seed);
      if (want == 5) cr_assert(g_last_grid <= 1 && g_last_smem > 0, "staged: grid %u smem %u", g_last_grid, g_last_smem);
    }
  /* batches of BQ__FUSED_NARROW_ROWS rows an SM or more, RMSNorm per token or per group
     (with a residual, rows of up to 512 accesses): the narrow entry that holds the row; the
     rules above for longer rows and every other case */
  static const int64_t naccs[] = {1, 256, 257, 512, 513, 1024, 1025, 2048, 2049};
  for (int i = 0; i < 9; i++) {
    fcase c;
    memset(&c, 0, sizeof c);
    c.rows = BQ__FUSED_NARROW_ROWS + (int64_t)(rnd() % 2);
    c.cols = naccs[i] * V;
    c.G = group_for(&c.cols);
    c.res = i % 2 ? 1 + (int)(rnd() % 2) : 0; /* half the rows with a residual: a buffer or in place */
    for (int yk = 0; yk < 3; yk++) { /* y's rows: aligned, their start off a chunk, their stride */
      c.offy = yk == 1 ? 1 + (int)(rnd() % (V - 1)) : 0; /* (V >= 2) */
      c.ys = yk == 2 ? c.cols + (E2M1 ? 2 : 1) + 2 * (int64_t)(rnd() % 4) : 0;
      c.force = -1;
      c.sms = 1;
      c.eps = 1e-6;
      run(c, "host's choice, a large batch");
      const int64_t nacc = (c.cols + V - 1) / V;
      const int narrow = RMS && dense(c) && (EMU_GRAN == BQ_GRAN_TOKEN || EMU_GRAN == BQ_GRAN_GROUP) &&
                         (!has_res(c) || nacc <= 512);
      const int want = narrow && nacc == 512    ? BQ__FUSED_M4F
                       : narrow && nacc < 512   ? BQ__FUSED_M4
                       : narrow && nacc == 1024 ? BQ__FUSED_M8F
                       : narrow && nacc < 1024  ? BQ__FUSED_M8
                       : narrow && nacc <= 2048 && sizeof(emu_fused::bq_t) < 8
                           ? BQ__FUSED_M16 /* (not f64 data, for which it spills) */
                       : staged_fits(c) && nacc > 512 && !reg_c8(nacc, c.res) ? BQ__FUSED_STAGED
                                                                              : wide_entry(c, nacc);
      cr_assert(g_last == g_kernels[want], "large batch: %lld accesses, y %d took another kernel than %d (seed 0x%llx)",
                (long long)nacc, yk, want, (unsigned long long)g_seed);
    }
  }
}
