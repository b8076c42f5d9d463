/* tests/test_gpu_fp8.c - FP8 storage (desc.int_type BQ_E4M3, OCP E4M3FN, and BQ_E5M2) on the
   GPU against the CPU references, bit for bit (docs/numerics.md, "FP8 storage").

   Static ops (tests/reference.h, ref_run): quantize, dequantize and fake quantize, forward
   and backward, x per tensor / channel / token / group x f32/f64/f16/bf16 x e4m3/e5m2 x
   scale type (the float type, f32). Inputs are fresh random data with edge values spliced
   in, or "sweeps" of the FP8 type's edges times a power-of-two scale: every finite value,
   every tie between neighbours (every binade, the subnormals, half the smallest subnormal),
   the f32 just above and below each tie, the saturation boundary (max, the float next to
   it either side, max + half an ulp, max + an ulp, 2 max), NaN, +-inf, +-0; and each of
   them moved one float of T up and down (a tie's neighbours in f64 data test that the
   f64 -> f32 -> FP8 path rounds once), T's bits just around max * s and half the smallest
   subnormal * s. Scale arrays hold zero, NaN,
   +-inf, negative, tiny (subnormal) and huge elements; per-tensor scales are finite and
   > 0, from tiny to huge. Dequantize reads random codes, every one of the 256 among them
   wherever the problem has 256 elements. Odd shapes (1, 3, 4097, 65537 elements; rows and
   columns off multiples of 4 and 16; groups that straddle 16-byte accesses), strided rows,
   misaligned pointers, and one large problem per float type. The software conversion
   (bq__fp8_soft, SKUs ".soft") runs the sweeps of quantize forward and a deterministic
   sweep with scale 1 on every float type.
   Dynamic quantize (tests/reference_dynamic.h, refd_run): per tensor / token / group x
   float type x FP8 type x scale type; segments of zeros (amax = 0: s = 1), constants, one
   outlier, NaN and +-inf elements, all NaN, subnormals (scales that underflow), values
   near T's max, power-of-two amax with the FP8 edges below it; odd, strided and long rows.
   UE8M0 scales (tests/reference.h reads the bytes: 2^(e - 127), 255 NaN): quantize,
   dequantize and fake quantize, both directions, per channel / token / group, every float
   type with s8, u8, e4m3 and e5m2 storage, scale arrays holding the bytes 0, 1, 126, 127,
   128, 254 and 255 among random ones. Power-of-two dynamic scales (reference_dynamic.h):
   per tensor / token / group x f32 / f64 / bf16 (every float type per row) x e4m3 / e5m2 /
   s8, UE8M0 out_scales or pow2_scales with f32 / T scales, with and without a random
   args.amax_bound (below the data's amax, exactly a power of two, far above; the smallest
   and largest of C); segments whose amax is 0, a power of two, or makes s a power of two
   or one float above one, NaN and inf elements (with a bound: a finite scale).
   Validation on the GPU path: a nonzero args.zero_point or a non-NULL args.zero_points is
   refused with BQ_ERROR_INVALID_ARGUMENT by can_implement and run, nothing is written;
   desc q-ranges and asymmetric dynamic plans are refused at select.
   Conversions, exhaustively: per-tensor quantize f32 -> e4m3 and -> e5m2 with scale 1 over
   all 2^32 f32 bit patterns, with the hardware SKU (cvt.rn.satfinite, sm_89 and later;
   only the software SKU below sm_89, logged) and the software SKU, each byte against
   ref_fp8_from_double on the host (pthreads); dequantize of all 256 codes of each type,
   every float type, scale 1, against ref_fp8_to_double.

   Every output allocation is poisoned first and compared whole afterwards: guard bytes
   before and after, gaps between strided rows (and padded parameter rows) must keep the
   poison; inputs must come back unchanged. Inputs are drawn fresh each run (the seed is in
   every failure message; BQ_TEST_SEED=<n> replays one).

   Without a usable CUDA driver/device every test is skipped. */
#define BARACUDA_QUANT_IMPLEMENTATION
#include "header_o0.h" /* the header, its host code at -O0 */
#include "reference_dynamic.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PLAN_CACHE_MAX 128
#define GPU_UTIL_BUFFERS
#include "gpu_util.h"


#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define GUARD GPU_GUARD /* bytes of poison before and after every output, garbage around inputs */

static const bq_dtype k_float_types[4] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16};
static const bq_dtype k_fp8_types[2] = {BQ_E4M3, BQ_E5M2};

/* ==== names, elements, bits ================================================================ */

static const char *op_name(bq_op op)
{
  return op == BQ_QUANTIZE ? "quantize" : op == BQ_DEQUANTIZE ? "dequantize"
         : op == BQ_FAKE_QUANTIZE ? "fake_quantize" : "dynamic_quantize";
}
static const char *gran_name(bq_granularity g)
{
  return g == BQ_PER_TENSOR ? "per_tensor" : g == BQ_PER_CHANNEL ? "per_channel"
         : g == BQ_PER_TOKEN ? "per_token" : g == BQ_PER_GROUP ? "per_group" : "per_?";
}

static const ref_fp8_format *fmt_of(bq_dtype I) { return &ref_fp8_formats[ref_fp8_kind_of(I)]; }
/* the smallest subnormal and the exponent of the top binade */
static double fp8_sub(bq_dtype I) { const ref_fp8_format *f = fmt_of(I); return ldexp(1.0, 1 - f->bias - f->mbits); }
static int fp8_emax(bq_dtype I) { return I == BQ_E5M2 ? 15 : 8; }

/* "0x7e (e4m3 448)" for FP8 codes, reference.h's format for the rest */
static void fmt_elem(char *buf, size_t cap, bq_dtype t, const void *p, int64_t i)
{
  if (ref_is_fp8(t)) {
    uint8_t c = ((const uint8_t *)p)[i];
    snprintf(buf, cap, "0x%02x (%s %.9g)", c, ref_dtype_name(t), ref_fp8_to_double(c, ref_fp8_kind_of(t)));
  } else {
    ref_format_elem(buf, cap, t, p, i);
  }
}

static void store_t(bq_dtype t, void *buf, int64_t i, double v)
{
  if (t == BQ_F64) ref_store_d(buf, i, v);
  else ref_store_f(t, buf, i, (float)v);
}

static uint64_t sign_bit(bq_dtype t)
{
  return t == BQ_F64 ? 1ull << 63 : t == BQ_F32 ? 0x80000000ull : 0x8000ull;
}
static uint64_t inf_bits(bq_dtype t)
{
  return t == BQ_F64 ? 0x7ff0000000000000ull : t == BQ_F32 ? 0x7f800000u : t == BQ_F16 ? 0x7c00u : 0x7f80u;
}
static uint64_t max_bits(bq_dtype t) { return inf_bits(t) - 1; }
static uint64_t mant_mask(bq_dtype t)
{
  return t == BQ_F64 ? 0x000fffffffffffffull : t == BQ_F32 ? 0x007fffffu : t == BQ_F16 ? 0x03ffu : 0x007fu;
}

static void store_bits(bq_dtype t, void *buf, int64_t i, uint64_t bits)
{
  unsigned char *p = (unsigned char *)buf;
  if (t == BQ_F64) memcpy(p + 8 * i, &bits, 8);
  else if (t == BQ_F32) { uint32_t b = (uint32_t)bits; memcpy(p + 4 * i, &b, 4); }
  else { uint16_t b = (uint16_t)bits; memcpy(p + 2 * i, &b, 2); }
}
static uint64_t load_bits(bq_dtype t, const void *buf, int64_t i)
{
  const unsigned char *p = (const unsigned char *)buf;
  if (t == BQ_F64) { uint64_t b; memcpy(&b, p + 8 * i, 8); return b; }
  if (t == BQ_F32) { uint32_t b; memcpy(&b, p + 4 * i, 4); return b; }
  { uint16_t b; memcpy(&b, p + 2 * i, 2); return b; }
}

/* Moves a finite element's magnitude by `delta` units in the last place of T (staying
   finite and on its side of zero): the floats just around a boundary. */
static void bump_bits(bq_dtype t, void *buf, int64_t i, int delta)
{
  uint64_t b = load_bits(t, buf, i), sg = b & sign_bit(t), mag = b & ~sign_bit(t);
  if (mag >= inf_bits(t)) return;
  if (delta < 0 && mag < (uint64_t)-delta) return;
  mag = delta < 0 ? mag - (uint64_t)-delta : mag + (uint64_t)delta;
  if (mag >= inf_bits(t)) return;
  store_bits(t, buf, i, sg | mag);
}

/* ==== the FP8 edge values (in quotient space: x / s) ========================================= */

#define EDGE_MAX 2400
static double g_edges[2][EDGE_MAX];
static int g_nedges[2];

static void edges_add(int k, double v)
{
  cr_assert(g_nedges[k] < EDGE_MAX, "edge list overflow");
  g_edges[k][g_nedges[k]++] = v;
}

/* Every finite value of the type; every midpoint between neighbours (ties, in every binade
   and among the subnormals: half the smallest subnormal is the one above 0) and the floats
   just either side of it; the saturation boundary; far outside the range; +-0, +-inf, NaN.
   Both signs of each. */
static void edges_init(bq_dtype I)
{
  const int k = (int)ref_fp8_kind_of(I);
  double vals[128], top, ulp, sub = fp8_sub(I);
  int nv = 0, c, i, n;
  if (g_nedges[k]) return;
  for (c = 0; c < 128; c++) {
    double d = ref_fp8_to_double((uint8_t)c, (ref_fp8_kind)k);
    if (!isfinite(d)) break;
    vals[nv++] = d;
  }
  top = vals[nv - 1];
  ulp = vals[nv - 1] - vals[nv - 2];
  for (i = 0; i < nv; i++) {
    edges_add(k, vals[i]);
    if (i + 1 < nv) {
      double mid = (vals[i] + vals[i + 1]) / 2; /* exact */
      edges_add(k, mid);
      edges_add(k, (double)nextafterf((float)mid, 0.0f));
      edges_add(k, (double)nextafterf((float)mid, INFINITY));
    }
  }
  /* saturation: max and the floats next to it, the tie above it, an ulp above, far out */
  edges_add(k, (double)nextafterf((float)top, INFINITY));
  edges_add(k, (double)nextafterf((float)top, 0.0f));
  edges_add(k, top + ulp / 2);
  edges_add(k, (double)nextafterf((float)(top + ulp / 2), 0.0f));
  edges_add(k, (double)nextafterf((float)(top + ulp / 2), INFINITY));
  edges_add(k, top + ulp);
  edges_add(k, top * 1.5);
  edges_add(k, top * 2);
  edges_add(k, 1e30);
  edges_add(k, (double)FLT_MAX);
  /* below the smallest subnormal */
  edges_add(k, sub / 4);
  edges_add(k, sub * 0.75);
  edges_add(k, sub * 1.25);
  edges_add(k, 1e-30);
  edges_add(k, 0x1p-149);
  n = g_nedges[k];
  for (i = 0; i < n; i++) edges_add(k, -g_edges[k][i]); /* -0 among them */
  edges_add(k, INFINITY);
  edges_add(k, -INFINITY);
  edges_add(k, NAN);
  edges_add(k, -NAN);
}

/* A power-of-two scale that keeps the edges (max * s, and the ties below the smallest
   subnormal * s) representable in T and in the scale type. */
static double pick_pow2_scale(bq_dtype T, bq_dtype I)
{
  if (T == BQ_F16) return ldexp(1.0, I == BQ_E5M2 ? (int)rnd_range(-5, 0) : (int)rnd_range(-6, 5));
  return ldexp(1.0, (int)rnd_range(-20, 20));
}

/* ==== value generators ======================================================================= */

#define N_SPECIALS 19
/* Edge values of the float type t, as bit patterns where that matters (test_gpu_affine's). */
static void put_special(bq_dtype t, void *buf, int64_t i, int which)
{
  static const uint64_t f64b[] = {0x7ff8000000000000ull, 0xfff8000000001234ull, 0x7ff0000000000001ull,
                                  0x7ff0000000000000ull, 0xfff0000000000000ull, 0x7fefffffffffffffull,
                                  0xffefffffffffffffull, 0x0000000000000001ull, 0x000fffffffffffffull,
                                  0x0010000000000000ull};
  static const uint64_t f32b[] = {0x7fc00000u, 0xffc01234u, 0x7f800001u, 0x7f800000u, 0xff800000u,
                                  0x7f7fffffu, 0xff7fffffu, 0x00000001u, 0x007fffffu, 0x00800000u};
  static const uint64_t f16b[] = {0x7e00, 0xfe12, 0x7c01, 0x7c00, 0xfc00, 0x7bff,
                                  0xfbff, 0x0001, 0x03ff, 0x0400};
  static const uint64_t b16b[] = {0x7fc0, 0xffc1, 0x7f81, 0x7f80, 0xff80, 0x7f7f,
                                  0xff7f, 0x0001, 0x007f, 0x0080};
  const uint64_t *tab = t == BQ_F64 ? f64b : t == BQ_F32 ? f32b : t == BQ_F16 ? f16b : b16b;
  if (which < 10) {
    store_bits(t, buf, i, tab[which] | ((which >= 7 && (rnd() & 1)) ? sign_bit(t) : 0));
    return;
  }
  switch (which) {
  case 10: store_t(t, buf, i, 1e30); break;
  case 11: store_t(t, buf, i, -1e30); break;
  case 12: store_t(t, buf, i, 65504.0); break;
  case 13: store_t(t, buf, i, -57344.0); break;
  case 14: store_t(t, buf, i, FLT_MAX); break;
  case 15: store_t(t, buf, i, 0.0); break;
  case 16: store_t(t, buf, i, -0.0); break;
  case 17: store_t(t, buf, i, (rnd() & 1) ? 1e300 : -1e-300); break; /* f64 only; others round */
  default: store_bits(t, buf, i, rnd()); break;                       /* any bit pattern */
  }
}

/* A scale that is finite and > 0 in `st` (the C type for per tensor): powers of two,
   full mantissas, 1, and now and then tiny (subnormal) or huge. */
static double pick_scale(bq_dtype st)
{
  int r = (int)(rnd() % 100);
  if (r < 35) return ldexp(1.0, (int)rnd_range(-12, 4));
  if (r < 75) return ldexp(1.0 + rnd_unit(), (int)rnd_range(-12, 3));
  if (r < 85) return 1.0;
  {
    static const double f16s[] = {0x1p-24, 0x1p-17, 0x1p-14, 65504.0, 0x1p15, 0x1.8p12};
    static const double b16s[] = {0x1p-133, 0x1p-126, 0x1p-100, 0x1.fep127, 0x1p120, 0x1p90};
    static const double f32s[] = {0x1p-149, 0x1.8p-140, 0x1p-126, 0x1.fffffep127, 0x1p100, 0x1p60};
    static const double f64s[] = {0x1p-1074, 0x1p-1060, 0x1p-1000, 0x1.fffffffffffffp1023, 0x1p1000, 0x1p200};
    return st == BQ_F16 ? PICK(f16s) : st == BQ_BF16 ? PICK(b16s) : st == BQ_F64 ? PICK(f64s) : PICK(f32s);
  }
}

/* A scale-array element: sometimes 0, -0, NaN, +-inf or negative. */
static double pick_dev_scale(bq_dtype st, int specials)
{
  if (specials && rnd() % 100 < 8) {
    switch (rnd() % 6) {
    case 0: return 0.0;
    case 1: return NAN;
    case 2: return -0.0;
    case 3: return INFINITY;
    case 4: return -INFINITY;
    default: return -pick_scale(st);
    }
  }
  return pick_scale(st);
}

/* x for an element quantized with C scale s into I: mostly around the FP8 range times s. */
static void gen_x(bq_dtype t, bq_dtype I, void *buf, int64_t i, double s, int specials)
{
  const ref_fp8_format *f = fmt_of(I);
  const int k = (int)ref_fp8_kind_of(I);
  double sg = (isfinite(s) && s != 0) ? fabs(s) : 1.0, sub = fp8_sub(I), v;
  double sign = (rnd() & 1) ? -1.0 : 1.0;
  int r = (int)(rnd() % 100);
  if (specials && r >= 88) {
    put_special(t, buf, i, (int)(rnd() % N_SPECIALS));
    return;
  }
  if (!ref_is_fp8(I)) { /* s8 / u8 (UE8M0 scale tests): quotients at integers, ties, past the range */
    if (r < 40) v = (double)rnd_range(-140, 270) + PICK(((const double[]){0.0, 0.5, -0.5, 0.25, 0.5 + 0x1p-20}));
    else if (r < 50) v = sign * (double)rnd_range(250, 600);
    else v = (rnd_unit() * 2.0 - 1.0) * 200.0;
    store_t(t, buf, i, v * sg);
    return;
  }
  if (r < 30) { /* log-uniform over every binade, the subnormals and past the top */
    v = sign * ldexp(1.0 + rnd_unit(), (int)rnd_range(1 - f->bias - f->mbits - 3, fp8_emax(I) + 2));
  } else if (r < 46) { /* the edge list */
    v = g_edges[k][rnd() % (uint64_t)g_nedges[k]];
  } else if (r < 54) { /* T's floats next to an edge (a tie's neighbours: f64 data's double rounding) */
    store_t(t, buf, i, g_edges[k][rnd() % (uint64_t)g_nedges[k]] * sg);
    bump_bits(t, buf, i, (rnd() & 1) ? 1 : -1);
    return;
  } else if (r < 62) { /* T's floats around max * s */
    store_t(t, buf, i, sign * f->max * sg);
    bump_bits(t, buf, i, (int)rnd_range(-2, 2));
    return;
  } else if (r < 69) { /* T's floats around half the smallest subnormal * s */
    store_t(t, buf, i, sign * sub / 2 * sg);
    bump_bits(t, buf, i, (int)rnd_range(-2, 2));
    return;
  } else if (r < 84) { /* small */
    v = (rnd_unit() * 4.0 - 2.0) * (rnd() & 1 ? 1.0 : sub * 4);
  } else {
    v = (rnd_unit() * 2.0 - 1.0) * f->max;
  }
  store_t(t, buf, i, v * sg);
}

/* An FP8 code for dequantize: any, with the special codes more often than chance. */
static uint8_t gen_code(bq_dtype I)
{
  static const uint8_t sp[] = {0x00, 0x80, 0x7F, 0xFF, 0x01, 0x81, 0x7C, 0xFC, 0x7B, 0xFB, 0x7E, 0xFE, 0x08, 0x04};
  (void)I;
  return rnd() % 100 < 85 ? (uint8_t)rnd() : PICK(sp);
}

static void gen_dy(bq_dtype t, void *buf, int64_t i, int specials)
{
  int r = (int)(rnd() % 100);
  if (specials && r < 10) put_special(t, buf, i, (int)(rnd() % N_SPECIALS));
  else if (r < 16) store_t(t, buf, i, (double)rnd_range(-8, 8));
  else store_t(t, buf, i, (rnd_unit() * 2.0 - 1.0) * ldexp(1.0, (int)rnd_range(-6, 6)));
}

/* A UE8M0 scale byte: mostly near 2^0, now and then any byte (255: NaN) */
static uint8_t gen_ue8m0(void)
{
  int r = (int)(rnd() % 100);
  if (r < 70) return (uint8_t)rnd_range(127 - 14, 127 + 6);
  if (r < 80) return PICK(((const uint8_t[]){0, 1, 126, 127, 128, 254, 255}));
  return (uint8_t)rnd();
}

static void store_scale(bq_dtype st, void *buf, int64_t i, double v)
{
  if (st == BQ_UE8M0) { /* v: a power of two, or 0, inf, NaN (others: their binade) */
    int e;
    ((uint8_t *)buf)[i] = (v != v || isinf(v)) ? 255 : v == 0.0 ? 0 : (frexp(fabs(v), &e), ref_ue8m0_from_pow2(ldexp(1.0, e - 1)));
    return;
  }
  if (st == BQ_F64) ref_store_d(buf, i, v);
  else ref_store_f(st, buf, i, (float)v);
}

/* ==== buffers: gpu_util.h's dbuf ============================================================== */

/* ==== plans: the hardware form (plan_get's cache) and the software form (its own) ============= */

static struct { bq_desc d; bq_plan *p; } g_soft[32];
static int g_nsoft;

/* A plan with the software conversion: selected with bq__fp8_soft set, its SKU ".soft". */
static bq_plan *soft_plan_select(const bq_desc *d, const char *what)
{
  bq_plan *p = NULL;
  bq_status st;
  bq__fp8_soft = 1;
  st = bq_plan_select(d, &p);
  bq__fp8_soft = 0;
  cr_assert_eq(st, BQ_SUCCESS, "bq_plan_select (bq__fp8_soft = 1) -> %s: %s | %s", bq_status_name(st),
               bq_last_error(), what);
  cr_assert(strstr(bq_plan_sku(p), ".soft") != NULL, "bq__fp8_soft = 1 selected SKU %s (no \".soft\") | %s",
            bq_plan_sku(p), what);
  return p;
}

static bq_plan *soft_plan_get(const bq_desc *d, const char *what)
{
  int i;
  for (i = 0; i < g_nsoft; i++)
    if (!memcmp(&g_soft[i].d, d, sizeof *d)) return g_soft[i].p;
  if (g_nsoft == COUNT(g_soft)) {
    for (i = 0; i < g_nsoft; i++) bq_plan_destroy(g_soft[i].p);
    g_nsoft = 0;
  }
  g_soft[g_nsoft].d = *d;
  g_soft[g_nsoft].p = soft_plan_select(d, what);
  return g_soft[g_nsoft++].p;
}

static bq_plan *hw_plan_get(const bq_desc *d, const char *what)
{
  bq_plan *p = plan_get(d, what);
  cr_assert(strstr(bq_plan_sku(p), ".soft") == NULL, "bq__fp8_soft = 0 selected SKU %s | %s", bq_plan_sku(p), what);
  return p;
}

/* ==== static ops: one run with guards, generation, launch, check =============================== */

enum { MODE_RANDOM, MODE_SWEEP };

typedef struct gcase {
  bq_desc d;     /* as given to bq_plan_select */
  bq_args a;     /* sizes and strides; pointers and scales are filled in */
  int off[4];    /* element offsets of x, y, dy, dx from a 256-byte boundary */
  int soff;      /* element offset of the scales */
  int specials;  /* splice edge values (random mode), special scale elements (both) */
  int mode;      /* MODE_RANDOM or MODE_SWEEP (the edge list in order, power-of-two scales) */
  int soft;      /* the software conversion's plan */
  double scale;  /* nonzero: every scale (per tensor: args.scale) is this */
  unsigned char poison;
} gcase;

typedef struct prep {
  gcase c;
  bq_desc dn; /* normalized */
  ref_layout L;
  bq_dtype xt, ot, st, I;
  int bwd, has_x;
  dbuf x, dy, out, sc;
  unsigned char *expected, *got;
  bq_args ha, da; /* host and device arguments */
  char what[768];
} prep;

static void prep_describe(prep *P, const char *sku)
{
  const bq_desc *d = &P->dn;
  const bq_args *a = &P->c.a;
  int n = snprintf(P->what, sizeof P->what, "%s %s %s T=%s I=%s scale_type=%s%s | ", op_name(d->op),
                   d->direction == BQ_BACKWARD ? "backward" : "forward", gran_name(d->granularity),
                   ref_dtype_name(d->float_type), ref_dtype_name(d->int_type), ref_dtype_name(d->scale_type),
                   P->c.soft ? " (software conversion)" : "");
  size_t k = n > 0 ? (size_t)n : 0;
  switch (d->granularity) {
  case BQ_PER_TENSOR:
    k += (size_t)snprintf(P->what + k, sizeof P->what - k, "numel=%lld scale=%a", (long long)a->numel, P->ha.scale);
    break;
  case BQ_PER_CHANNEL: {
    int i;
    k += (size_t)snprintf(P->what + k, sizeof P->what - k, "shape=[");
    for (i = 0; i < a->rank && k < sizeof P->what; i++)
      k += (size_t)snprintf(P->what + k, sizeof P->what - k, "%s%lld", i ? "," : "", (long long)a->shape[i]);
    if (k < sizeof P->what) k += (size_t)snprintf(P->what + k, sizeof P->what - k, "] axis=%d", a->axis);
    break;
  }
  default:
    k += (size_t)snprintf(P->what + k, sizeof P->what - k, "rows=%lld cols=%lld x_row_stride=%lld y_row_stride=%lld",
                          (long long)a->rows, (long long)a->cols, (long long)a->x_row_stride,
                          (long long)a->y_row_stride);
    if (d->granularity == BQ_PER_GROUP && k < sizeof P->what)
      k += (size_t)snprintf(P->what + k, sizeof P->what - k, " group_size=%lld group_row_stride=%lld",
                            (long long)a->group_size, (long long)a->group_row_stride);
    break;
  }
  if (k < sizeof P->what)
    snprintf(P->what + k, sizeof P->what - k,
             " | offsets x=%d y=%d dy=%d dx=%d scales=%d | %s%s | poison=0x%02x | sku=%s | BQ_TEST_SEED=0x%llx",
             P->c.off[0], P->c.off[1], P->c.off[2], P->c.off[3], P->c.soff,
             P->c.mode == MODE_SWEEP ? "edge sweep" : "random", P->c.specials ? " with specials" : "", P->c.poison,
             sku ? sku : "?", (unsigned long long)g_seed);
}

static void prep_init(prep *P, const gcase *c)
{
  memset(P, 0, sizeof *P);
  P->c = *c;
  P->dn = ref_desc_normalize(&c->d);
  if (P->dn.granularity == BQ_PER_TENSOR) P->dn.scale_type = P->dn.float_type == BQ_F64 ? BQ_F64 : BQ_F32;
  cr_assert_eq(ref_layout_init(&P->L, &P->dn, &c->a), 0, "bad test case (layout)");
  P->bwd = P->dn.direction == BQ_BACKWARD;
  P->I = P->dn.int_type;
  P->xt = ref_x_type(&P->dn);
  P->ot = ref_out_type(&P->dn);
  P->st = P->dn.scale_type;
  P->has_x = !(P->bwd && P->dn.op == BQ_DEQUANTIZE); /* dequantize backward does not read x */
  edges_init(P->I);
  if (P->has_x) dbuf_make(&P->x, ref_dtype_size(P->xt), P->L.x_extent, c->off[0]);
  if (P->bwd) dbuf_make(&P->dy, ref_dtype_size(P->dn.float_type), P->L.y_extent, c->off[2]);
  dbuf_make(&P->out, ref_dtype_size(P->ot), P->bwd ? P->L.x_extent : P->L.y_extent, P->bwd ? c->off[3] : c->off[1]);
  if (P->dn.granularity != BQ_PER_TENSOR) dbuf_make(&P->sc, ref_dtype_size(P->st), P->L.n_params, c->soff);
  P->expected = (unsigned char *)malloc(P->out.total);
  P->got = (unsigned char *)malloc(P->out.total);
  cr_assert(P->expected && P->got);

  P->ha = c->a;
  P->da = c->a;
  P->ha.x = P->has_x ? P->x.h + P->x.pre : NULL;
  P->da.x = P->has_x ? P->x.dev + P->x.pre : NULL;
  P->ha.dy = P->bwd ? P->dy.h + P->dy.pre : NULL;
  P->da.dy = P->bwd ? P->dy.dev + P->dy.pre : NULL;
  P->ha.y = P->bwd ? NULL : P->expected + P->out.pre;
  P->da.y = P->bwd ? NULL : P->out.dev + P->out.pre;
  P->ha.dx = P->bwd ? P->expected + P->out.pre : NULL;
  P->da.dx = P->bwd ? P->out.dev + P->out.pre : NULL;
  if (P->dn.granularity != BQ_PER_TENSOR) {
    P->ha.scales = P->sc.h + P->sc.pre;
    P->da.scales = P->sc.dev + P->sc.pre;
  }
  P->ha.zero_points = P->da.zero_points = NULL; /* FP8: none */
  P->ha.zero_point = P->da.zero_point = 0;
}

/* Draws fresh inputs into the host images. */
static void prep_generate(prep *P)
{
  const bq_desc *d = &P->dn;
  const ref_layout *L = &P->L;
  const int sp = P->c.specials, sweep = P->c.mode == MODE_SWEEP, k = (int)ref_fp8_kind_of(P->I);
  const int perm = (int)rnd_range(0, 255);
  int64_t e, xi, yi, pi;
  if (P->has_x) fill_garbage(P->x.h, P->x.total);
  if (P->bwd) fill_garbage(P->dy.h, P->dy.total);
  if (d->granularity == BQ_PER_TENSOR) {
    bq_dtype ct = d->float_type == BQ_F64 ? BQ_F64 : BQ_F32;
    P->ha.scale = P->c.scale != 0 ? P->c.scale : sweep ? pick_pow2_scale(d->float_type, P->I) : pick_scale(ct);
    P->da.scale = P->ha.scale;
  } else {
    void *s = P->sc.h + P->sc.pre;
    fill_garbage(P->sc.h, P->sc.total);
    for (pi = 0; pi < L->n_params; pi++)
      store_scale(P->st, s, pi,
                  P->c.scale != 0 ? P->c.scale
                  : sweep ? (sp && rnd() % 100 < 5 ? pick_dev_scale(P->st, 1) : pick_pow2_scale(d->float_type, P->I))
                          : pick_dev_scale(P->st, sp));
    if (P->st == BQ_UE8M0 && P->c.scale == 0) { /* bytes; every edge byte where there are 7 */
      static const uint8_t edge[] = {0, 1, 126, 127, 128, 254, 255};
      uint8_t *b = (uint8_t *)s;
      for (pi = 0; pi < L->n_params; pi++) b[pi] = gen_ue8m0();
      if (L->n_params >= 7) {
        int64_t at = rnd_range(0, L->n_params - 7);
        for (pi = 0; pi < 7; pi++) b[at + pi] = edge[pi];
      } else if (L->n_params > 0) {
        b[rnd_range(0, L->n_params - 1)] = PICK(edge);
      }
    } else if (sp && P->c.scale == 0 && L->n_params >= 12) { /* at least one of each special scale */
      store_scale(P->st, s, rnd_range(0, L->n_params - 1), 0.0);
      store_scale(P->st, s, rnd_range(0, L->n_params - 1), NAN);
      store_scale(P->st, s, rnd_range(0, L->n_params - 1), INFINITY);
      store_scale(P->st, s, rnd_range(0, L->n_params - 1), -pick_scale(P->st));
      store_scale(P->st, s, rnd_range(0, L->n_params - 1), -0.0);
    }
  }
  for (e = 0; e < L->count; e++) {
    double s;
    ref_layout_index(L, e, &xi, &yi, &pi);
    s = ref_scale_d(d, &P->ha, pi);
    if (d->float_type != BQ_F64 && d->granularity == BQ_PER_TENSOR) s = (double)(float)s;
    if (P->has_x) {
      if (P->xt == BQ_S8 || P->xt == BQ_U8) { /* dequantize of integers: any byte */
        ((unsigned char *)(void *)P->ha.x)[xi] = (unsigned char)rnd();
      } else if (ref_is_fp8(P->xt)) { /* dequantize: codes, all 256 of them where there are 256 elements */
        uint8_t code = (L->count >= 256 && (sweep || e < 256)) ? (uint8_t)((e * 167 + perm) & 255) : gen_code(P->I);
        ((unsigned char *)(void *)P->ha.x)[xi] = code;
      } else if (sweep) { /* the list, then the list a float of T above, then below */
        const double sg = (isfinite(s) && s != 0) ? fabs(s) : 1.0;
        const int pass = (int)((e / g_nedges[k]) % 3);
        store_t(P->xt, (void *)P->ha.x, xi, g_edges[k][e % g_nedges[k]] * sg);
        bump_bits(P->xt, (void *)P->ha.x, xi, pass == 2 ? -1 : pass);
      } else {
        gen_x(P->xt, P->I, (void *)P->ha.x, xi, s, sp);
      }
    }
    if (P->bwd) gen_dy(d->float_type, (void *)P->ha.dy, yi, sp);
  }
}

static void prep_upload(prep *P)
{
  if (P->has_x) BQ_OK(bq_memcpy_to_device(P->x.dev, P->x.h, P->x.total), "%s", P->what);
  if (P->bwd) BQ_OK(bq_memcpy_to_device(P->dy.dev, P->dy.h, P->dy.total), "%s", P->what);
  if (P->sc.dev) BQ_OK(bq_memcpy_to_device(P->sc.dev, P->sc.h, P->sc.total), "%s", P->what);
  BQ_OK(bq_memset(P->out.dev, P->c.poison, P->out.total), "%s", P->what);
}

#define REPORT_MAX 8

/* reference.h's ref_compare_output, with FP8 codes named: compares the whole output
   allocation (guards and row gaps included) and describes the first mismatches. */
static size_t compare_output(const prep *P, char *msg, size_t cap)
{
  const bq_desc *d = &P->dn;
  const ref_layout *L = &P->L;
  const bq_args *host = &P->ha;
  const size_t oes = ref_dtype_size(P->ot);
  const int64_t total = (int64_t)(P->out.total / oes), origin = (int64_t)(P->out.pre / oes);
  const int uses_y = ref_out_uses_y(d);
  const int64_t extent = uses_y ? L->y_extent : L->x_extent;
  size_t bad = 0;
  int64_t j;
  char e[80], g[80], v[80];
  msg[0] = 0;
  for (j = 0; j < total; j++) {
    int64_t k = j - origin, lg, xi, yi, pi;
    if (ref_elem_equal(P->ot, P->expected, P->got, j)) continue;
    if (bad++ >= REPORT_MAX) continue;
    fmt_elem(e, sizeof e, P->ot, P->expected, j);
    fmt_elem(g, sizeof g, P->ot, P->got, j);
    if (k < 0 || k >= extent) {
      ref__append(msg, cap, "  buffer[%lld] (guard, output index %lld): expected %s got %s\n", (long long)j,
                  (long long)k, e, g);
      continue;
    }
    lg = ref_layout_logical(L, k, uses_y);
    if (lg < 0) {
      ref__append(msg, cap, "  out[%lld] (gap between rows): expected %s got %s\n", (long long)k, e, g);
      continue;
    }
    ref_layout_index(L, lg, &xi, &yi, &pi);
    ref__append(msg, cap, "  out[%lld] (elem %lld, row %lld col %lld):", (long long)k, (long long)lg,
                (long long)(lg / (L->cols ? L->cols : 1)), (long long)(lg % (L->cols ? L->cols : 1)));
    if (P->has_x) {
      fmt_elem(v, sizeof v, P->xt, host->x, xi);
      ref__append(msg, cap, " x=%s", v);
    }
    if (P->bwd) {
      fmt_elem(v, sizeof v, d->float_type, host->dy, yi);
      ref__append(msg, cap, " dy=%s", v);
    }
    if (d->granularity == BQ_PER_TENSOR) {
      ref__append(msg, cap, " s=%a", host->scale);
    } else {
      fmt_elem(v, sizeof v, P->st, host->scales, pi);
      ref__append(msg, cap, " s[%lld]=%s", (long long)pi, v);
    }
    if (P->has_x && ref_is_float(P->xt)) { /* the quotient in C, for ties and the boundary */
      double s = ref_scale_d(d, host, pi), q;
      if (d->float_type == BQ_F64) q = ref_load_d(BQ_F64, host->x, xi) / s;
      else { volatile float qf = ref_load_f(P->xt, host->x, xi) / (float)s; q = qf; }
      ref__append(msg, cap, " x/s=%a", q);
    }
    ref__append(msg, cap, " expected %s got %s\n", e, g);
  }
  if (bad > REPORT_MAX) ref__append(msg, cap, "  ... %zu mismatches in all\n", bad);
  return bad;
}

static void prep_check(prep *P)
{
  size_t bad;
  char msg[6144];
  memset(P->expected, P->c.poison, P->out.total);
  cr_assert_eq(ref_run(&P->c.d, &P->ha), 0, "reference rejected the case: %s", P->what);
  BQ_OK(bq_memcpy_to_host(P->got, P->out.dev, P->out.total), "%s", P->what);
  bad = compare_output(P, msg, sizeof msg);
  cr_assert(bad == 0, "%s\n  %zu of %zu output elements differ (guards included):\n%s", P->what, bad,
            P->out.total / ref_dtype_size(P->ot), msg);
  check_unchanged(&P->x, "x", P->what);
  check_unchanged(&P->dy, "dy", P->what);
  check_unchanged(&P->sc, "scales", P->what);
}

static void prep_free(prep *P)
{
  dbuf_free(&P->x);
  dbuf_free(&P->dy);
  dbuf_free(&P->out);
  dbuf_free(&P->sc);
  free(P->expected);
  free(P->got);
}

static bq_plan *case_plan(const gcase *c, const char *what)
{
  return c->soft ? soft_plan_get(&c->d, what) : hw_plan_get(&c->d, what);
}

/* One case end to end on the legacy default stream. */
static void run_case(const gcase *c)
{
  prep P;
  bq_plan *plan;
  size_t ws = 1;
  prep_init(&P, c);
  prep_generate(&P);
  prep_describe(&P, NULL);
  plan = case_plan(c, P.what);
  prep_describe(&P, bq_plan_sku(plan));
  prep_upload(&P);
  BQ_OK(bq_plan_can_implement(plan, &P.da), "%s", P.what);
  BQ_OK(bq_plan_workspace_size(plan, &P.da, &ws), "%s", P.what);
  cr_assert_eq(ws, 0, "%s: workspace %zu bytes (static ops need none)", P.what, ws);
  BQ_OK(bq_plan_run(plan, &P.da, NULL, 0, NULL), "%s", P.what);
  BQ_OK(bq_synchronize(NULL), "%s", P.what);
  prep_check(&P);
  prep_free(&P);
}

/* ==== the static matrix ========================================================================== */

typedef struct { int rank; int64_t shape[BQ_MAX_RANK]; int axis; } chan_case;
typedef struct { int64_t rows, cols, xs, ys; } tok_case;
typedef struct { int64_t rows, cols, g, grs, xs, ys; } grp_case;

static const int64_t k_tensor_sizes[] = {0, 1, 3, 4, 16, 17, 255, 256, 1000, 4097, 65537};

static const chan_case k_chan_cases[] = {
  {1, {1}, 0}, {1, {17}, 0}, {1, {1000}, -1}, {2, {5, 7}, 0}, {2, {7, 5}, 1}, {2, {3, 4097}, -1},
  {2, {4097, 3}, -2}, {3, {3, 5, 7}, 1}, {3, {2, 3, 17}, -1}, {3, {3, 0, 5}, 1}, {4, {2, 3, 4, 5}, 2},
  {8, {2, 1, 3, 2, 1, 2, 3, 2}, 5},
  /* the channel innermost with C % 4 == 0, and runs of whole 16-byte accesses */
  {2, {33, 96}, 1}, {3, {3, 5, 128}, -1}, {2, {19, 260}, -1}, {3, {3, 5, 64}, 1}, {2, {9, 1032}, 0},
};

static const tok_case k_tok_cases[] = {
  {0, 7, 0, 0}, {1, 1, 0, 0}, {7, 1, 3, 5}, {3, 17, 0, 0}, {5, 17, 19, 23}, {4, 4095, 0, 0},
  {3, 4095, 4097, 4101}, {2, 64, 64, 65}, {33, 256, 0, 0}, {9, 1000, 1003, 1000}, {2, 3, 1001, 7},
  {6, 260, 0, 0}, {5, 4096, 4100, 4113},
};

static const grp_case k_grp_cases[] = {
  {0, 96, 32, 0, 0, 0}, {1, 1, 1, 0, 0, 0}, {1, 3, 3, 0, 0, 0}, {4, 96, 32, 0, 0, 0}, {3, 9, 3, 5, 11, 13},
  {2, 128, 1, 130, 0, 0}, {5, 256, 128, 3, 257, 259}, {2, 4095, 3, 1366, 4097, 4099}, {6, 32, 32, 2, 0, 33},
  {17, 96, 3, 0, 0, 0}, {4, 4096, 128, 0, 0, 0}, {3, 256, 64, 4, 264, 272}, {2, 3072, 1536, 0, 0, 0},
  /* groups that 16-byte accesses straddle */
  {7, 4095, 105, 0, 0, 0}, {5, 111, 37, 3, 0, 0}, {1, 8197, 1171, 0, 0, 0}, {3, 60, 12, 0, 61, 63},
  {4, 280, 7, 41, 283, 0},
};

/* Offsets: mode 0 all aligned, 1 the same nonzero element offset everywhere, 2 independent. */
static void set_offsets(gcase *c, int mode)
{
  int i, k = (int)rnd_range(1, 15);
  for (i = 0; i < 4; i++) c->off[i] = mode == 0 ? 0 : mode == 1 ? k : (int)rnd_range(0, 15);
  if (mode == 2 && c->off[0] == c->off[1] && c->off[0] == c->off[3]) c->off[1] = (c->off[1] + 5) % 16;
  c->soff = mode == 0 ? 0 : (int)rnd_range(0, 3);
}

static void set_shape(gcase *c, bq_granularity g, int idx)
{
  memset(&c->a, 0, sizeof c->a);
  switch (g) {
  case BQ_PER_CHANNEL:
    c->a.rank = k_chan_cases[idx].rank;
    memcpy(c->a.shape, k_chan_cases[idx].shape, sizeof c->a.shape);
    c->a.axis = k_chan_cases[idx].axis;
    break;
  case BQ_PER_TOKEN:
    c->a.rows = k_tok_cases[idx].rows; c->a.cols = k_tok_cases[idx].cols;
    c->a.x_row_stride = k_tok_cases[idx].xs; c->a.y_row_stride = k_tok_cases[idx].ys;
    break;
  case BQ_PER_GROUP:
    c->a.rows = k_grp_cases[idx].rows; c->a.cols = k_grp_cases[idx].cols;
    c->a.group_size = k_grp_cases[idx].g; c->a.group_row_stride = k_grp_cases[idx].grs;
    c->a.x_row_stride = k_grp_cases[idx].xs; c->a.y_row_stride = k_grp_cases[idx].ys;
    break;
  default: c->a.numel = k_tensor_sizes[idx]; break;
  }
}

static int n_cases(bq_granularity g)
{
  return g == BQ_PER_TENSOR ? COUNT(k_tensor_sizes) : g == BQ_PER_CHANNEL ? COUNT(k_chan_cases)
         : g == BQ_PER_TOKEN ? COUNT(k_tok_cases) : COUNT(k_grp_cases);
}

/* The large problems: which = 0: ~4M elements, 1: ~1M (odd) elements, strided where rows. */
static void set_big_shape(gcase *c, bq_granularity g, int which)
{
  memset(&c->a, 0, sizeof c->a);
  switch (g) {
  case BQ_PER_CHANNEL:
    if (!which) { c->a.rank = 2; c->a.shape[0] = 1024; c->a.shape[1] = 4099; c->a.axis = -1; }
    else { c->a.rank = 3; c->a.shape[0] = 7; c->a.shape[1] = 1009; c->a.shape[2] = 143; c->a.axis = 1; }
    break;
  case BQ_PER_TOKEN:
    if (which) { c->a.rows = 977; c->a.cols = 1023; c->a.x_row_stride = 1024; c->a.y_row_stride = 1031; }
    else { c->a.rows = 1024; c->a.cols = 4096; }
    break;
  case BQ_PER_GROUP:
    if (which) {
      c->a.rows = 1001; c->a.cols = 999; c->a.group_size = 3; c->a.group_row_stride = 400;
      c->a.x_row_stride = 1000; c->a.y_row_stride = 1001;
    } else {
      c->a.rows = 1024; c->a.cols = 4096; c->a.group_size = 128;
    }
    break;
  default: c->a.numel = which ? 1000003 : ((int64_t)1 << 22) + 19; break;
  }
}

static bq_desc static_desc(bq_op op, bq_direction dir, bq_granularity g, bq_dtype T, bq_dtype I, bq_dtype st)
{
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = op;
  d.direction = dir;
  d.granularity = g;
  d.float_type = T;
  d.int_type = I;
  d.scale_type = st;
  return d;
}

/* Every float type x FP8 type (x scale type) for one granularity, op and direction: the
   shapes with fresh data, in random mode and as edge sweeps, one large problem per float
   type; quantize forward also runs its sweeps with the software conversion. */
static void run_matrix(bq_granularity g, bq_op op, bq_direction dir)
{
  int ti, ii, sti, k;
  gpu_begin();
  for (ti = 0; ti < 4; ti++)
    for (ii = 0; ii < 2; ii++) {
      const bq_dtype T = k_float_types[ti];
      const int nst = (g == BQ_PER_TENSOR || T == BQ_F32) ? 1 : 2;
      for (sti = 0; sti < nst; sti++) {
        gcase c;
        memset(&c, 0, sizeof c);
        /* scale type: the float type, or f32 (spelled 0 = default or BQ_F32) */
        c.d = static_desc(op, dir, g, T, k_fp8_types[ii],
                          g == BQ_PER_TENSOR ? BQ_DTYPE_DEFAULT
                          : (sti == 0 && nst == 2) ? T
                          : ((ti + ii) % 2 ? BQ_F32 : BQ_DTYPE_DEFAULT));
        for (k = 0; k < n_cases(g); k++) {
          set_shape(&c, g, k);
          set_offsets(&c, k % 3);
          c.specials = k % 5 != 1;
          c.mode = k % 3 == 1 ? MODE_SWEEP : MODE_RANDOM;
          c.poison = (rnd() & 1) ? 0xa5 : 0x5a;
          c.soft = 0;
          run_case(&c);
          if (op == BQ_QUANTIZE && dir == BQ_FORWARD && sti == 0 && c.mode == MODE_SWEEP) {
            c.soft = 1;
            run_case(&c);
          }
        }
        if (sti == nst - 1 && ii == (ti & 1)) { /* one large problem per float type */
          set_big_shape(&c, g, (ti + (int)op + (int)dir) & 1);
          set_offsets(&c, (ti + (int)op) % 3);
          c.specials = 1;
          c.mode = MODE_RANDOM;
          c.soft = 0;
          c.poison = 0xa5;
          run_case(&c);
        }
      }
    }
}

#define FP8_SUITE(suite, gran)                                                           \
  Test(suite, quantize_forward) { run_matrix(gran, BQ_QUANTIZE, BQ_FORWARD); }           \
  Test(suite, quantize_backward) { run_matrix(gran, BQ_QUANTIZE, BQ_BACKWARD); }         \
  Test(suite, dequantize_forward) { run_matrix(gran, BQ_DEQUANTIZE, BQ_FORWARD); }       \
  Test(suite, dequantize_backward) { run_matrix(gran, BQ_DEQUANTIZE, BQ_BACKWARD); }     \
  Test(suite, fake_quantize_forward) { run_matrix(gran, BQ_FAKE_QUANTIZE, BQ_FORWARD); } \
  Test(suite, fake_quantize_backward) { run_matrix(gran, BQ_FAKE_QUANTIZE, BQ_BACKWARD); }

FP8_SUITE(fp8_per_tensor, BQ_PER_TENSOR)
FP8_SUITE(fp8_per_channel, BQ_PER_CHANNEL)
FP8_SUITE(fp8_per_token, BQ_PER_TOKEN)
FP8_SUITE(fp8_per_group, BQ_PER_GROUP)

/* Every edge value in turn with scale 1 and with power-of-two scales, per tensor and per
   token (a scale a row), for quantize and fake quantize in both directions, hardware and
   software conversion; every float type and FP8 type. */
Test(fp8_edges, every_edge_value)
{
  static const bq_op ops[2] = {BQ_QUANTIZE, BQ_FAKE_QUANTIZE};
  int ti, ii, oi, dir, soft, gi;
  gpu_begin();
  for (ti = 0; ti < 4; ti++)
    for (ii = 0; ii < 2; ii++)
      for (oi = 0; oi < 2; oi++)
        for (dir = 0; dir < 2; dir++)
          for (soft = 0; soft < (dir ? 1 : 2); soft++)
            for (gi = 0; gi < 2; gi++) {
              const bq_dtype T = k_float_types[ti], I = k_fp8_types[ii];
              gcase c;
              edges_init(I);
              memset(&c, 0, sizeof c);
              c.d = static_desc(ops[oi], dir ? BQ_BACKWARD : BQ_FORWARD, gi ? BQ_PER_TOKEN : BQ_PER_TENSOR, T, I,
                                gi ? T : BQ_DTYPE_DEFAULT);
              if (gi) { /* one row per scale: the whole list in each row, exact, a float of T above, below */
                c.a.rows = 6;
                c.a.cols = g_nedges[ref_fp8_kind_of(I)];
                c.a.x_row_stride = c.a.cols + 3;
                c.a.y_row_stride = c.a.cols + 1;
              } else { /* the list exact, a float of T above, a float below */
                c.a.numel = 3 * g_nedges[ref_fp8_kind_of(I)];
                c.scale = 1.0;
              }
              set_offsets(&c, (ti + ii + oi) % 3);
              c.specials = 0;
              c.mode = MODE_SWEEP;
              c.soft = soft;
              c.poison = 0x5a;
              run_case(&c);
              if (!gi) { /* and a power-of-two scale other than 1 */
                c.scale = pick_pow2_scale(T, I);
                run_case(&c);
              }
            }
}

/* ==== validation on the GPU path ================================================================== */

/* A nonzero args.zero_point (per tensor) or a non-NULL args.zero_points (the arrays, even all
   zero) is refused by can_implement and by run with BQ_ERROR_INVALID_ARGUMENT naming the field,
   and nothing is written; the same arguments with no zero points then run and match. */
Test(fp8_validation, zero_points_refused)
{
  static const bq_granularity grans[4] = {BQ_PER_TENSOR, BQ_PER_CHANNEL, BQ_PER_TOKEN, BQ_PER_GROUP};
  static const bq_op ops[3] = {BQ_QUANTIZE, BQ_DEQUANTIZE, BQ_FAKE_QUANTIZE};
  static const int32_t zps[3] = {1, -1, INT32_MIN};
  int gi, oi, dir, v;
  gpu_begin();
  for (gi = 0; gi < 4; gi++)
    for (oi = 0; oi < 3; oi++)
      for (dir = 0; dir < 2; dir++) {
        const bq_dtype T = k_float_types[(gi + oi + dir) % 4], I = k_fp8_types[(gi + oi) % 2];
        gcase c;
        prep P;
        bq_plan *plan;
        void *zdev = NULL;
        int32_t zh[64];
        memset(&c, 0, sizeof c);
        c.d = static_desc(ops[oi], dir ? BQ_BACKWARD : BQ_FORWARD, grans[gi], T, I, BQ_DTYPE_DEFAULT);
        switch (grans[gi]) {
        case BQ_PER_CHANNEL: c.a.rank = 2; c.a.shape[0] = 5; c.a.shape[1] = 7; c.a.axis = 0; break;
        case BQ_PER_TOKEN: c.a.rows = 5; c.a.cols = 33; c.a.x_row_stride = 35; c.a.y_row_stride = 37; break;
        case BQ_PER_GROUP: c.a.rows = 3; c.a.cols = 48; c.a.group_size = 16; break;
        default: c.a.numel = 1000; break;
        }
        set_offsets(&c, 0);
        c.specials = 1;
        c.poison = 0xa5;
        prep_init(&P, &c);
        prep_generate(&P);
        plan = hw_plan_get(&c.d, "zero point validation");
        prep_describe(&P, bq_plan_sku(plan));
        prep_upload(&P);
        for (v = 0; v < 3; v++) {
          bq_args a = P.da;
          bq_status st;
          size_t i;
          const char *field = grans[gi] == BQ_PER_TENSOR ? "args.zero_point" : "args.zero_points";
          if (grans[gi] == BQ_PER_TENSOR) {
            a.zero_point = zps[v];
          } else {
            /* v = 0: an all-zero array, else nonzero points: non-NULL is what is refused */
            for (i = 0; i < 64; i++) zh[i] = v == 0 ? 0 : zps[v];
            if (!zdev) BQ_OK(bq_malloc(&zdev, sizeof zh), "%s", P.what);
            BQ_OK(bq_memcpy_to_device(zdev, zh, sizeof zh), "%s", P.what);
            a.zero_points = (const int32_t *)zdev;
          }
          st = bq_plan_can_implement(plan, &a);
          cr_assert_eq(st, BQ_ERROR_INVALID_ARGUMENT, "%s=%d: can_implement -> %s (%s), expected "
                       "BQ_ERROR_INVALID_ARGUMENT | %s", field, grans[gi] == BQ_PER_TENSOR ? (int)zps[v] : v,
                       bq_status_name(st), bq_last_error(), P.what);
          cr_assert(strstr(bq_last_error(), field) != NULL, "the error does not name %s: %s | %s", field,
                    bq_last_error(), P.what);
          st = bq_plan_run(plan, &a, NULL, 0, NULL);
          cr_assert_eq(st, BQ_ERROR_INVALID_ARGUMENT, "%s: run -> %s (%s), expected BQ_ERROR_INVALID_ARGUMENT | %s",
                       field, bq_status_name(st), bq_last_error(), P.what);
          cr_assert(strstr(bq_last_error(), field) != NULL, "the error does not name %s: %s | %s", field,
                    bq_last_error(), P.what);
          BQ_OK(bq_synchronize(NULL), "%s", P.what);
          BQ_OK(bq_memcpy_to_host(P.got, P.out.dev, P.out.total), "%s", P.what);
          for (i = 0; i < P.out.total && P.got[i] == c.poison; i++) {}
          cr_assert_eq(i, P.out.total, "%s refused, yet byte %zu of the output allocation (data at %zu) changed "
                       "| %s", field, i, P.out.pre, P.what);
        }
        if (zdev) bq_free(zdev);
        /* without the zero points the same call runs and matches */
        BQ_OK(bq_plan_run(plan, &P.da, NULL, 0, NULL), "%s", P.what);
        BQ_OK(bq_synchronize(NULL), "%s", P.what);
        prep_check(&P);
        prep_free(&P);
      }
}

/* q-ranges and asymmetric dynamic quantization are refused at select (FP8 has neither). */
Test(fp8_validation, desc_refused)
{
  int ii;
  gpu_begin();
  for (ii = 0; ii < 2; ii++) {
    bq_desc d = static_desc(BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F32, k_fp8_types[ii], BQ_DTYPE_DEFAULT);
    bq_plan *p = NULL;
    bq_status st;
    d.qmin = -7;
    d.qmax = 7;
    st = bq_plan_select(&d, &p);
    cr_assert_eq(st, BQ_ERROR_INVALID_ARGUMENT, "%s with qmin/qmax: select -> %s (%s)", ref_dtype_name(d.int_type),
                 bq_status_name(st), bq_last_error());
    cr_assert(strstr(bq_last_error(), "desc.qmin") != NULL, "%s", bq_last_error());
    d = static_desc(BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_BF16, k_fp8_types[ii], BQ_DTYPE_DEFAULT);
    d.asymmetric = 1;
    st = bq_plan_select(&d, &p);
    cr_assert_eq(st, BQ_ERROR_INVALID_ARGUMENT, "%s asymmetric dynamic: select -> %s (%s)",
                 ref_dtype_name(d.int_type), bq_status_name(st), bq_last_error());
    cr_assert(strstr(bq_last_error(), "desc.asymmetric") != NULL, "%s", bq_last_error());
  }
}

/* ==== dynamic quantize ============================================================================= */

/* elements per 16-byte access, and the longest row the dynamic kernel keeps on chip */
static int vec_of(bq_dtype T) { return 16 / (int)ref_dtype_size(T); }
static int64_t on_chip_of(bq_dtype T) { return (int64_t)256 * 8 * vec_of(T); }

static uint64_t nan_bits(bq_dtype t)
{
  static const uint64_t f64b[] = {0x7ff8000000000000ull, 0xfff8000000001234ull, 0x7ff0000000000001ull,
                                  0x7ff4000000000000ull};
  static const uint64_t f32b[] = {0x7fc00000u, 0xffc01234u, 0x7f800001u, 0x7fa00000u};
  static const uint64_t f16b[] = {0x7e00, 0xfe12, 0x7c01, 0x7d00};
  static const uint64_t b16b[] = {0x7fc0, 0xffc1, 0x7f81, 0x7fa0};
  const uint64_t *tab = t == BQ_F64 ? f64b : t == BQ_F32 ? f32b : t == BQ_F16 ? f16b : b16b;
  return tab[rnd() % 4];
}

enum {
  K_RANDOM,    /* uniform in [-m, m], m a random power of two */
  K_EDGES,     /* amax = max * 2^e (one element), the rest the FP8 edges below it times 2^e */
  K_ZERO,      /* all +-0: amax == 0, s = 1 */
  K_CONST,     /* one value repeated */
  K_SINGLE,    /* zeros and one nonzero element */
  K_OUTLIER,   /* small values and one +-1e30 (f16: +-65504) */
  K_NAN,       /* random with ~20% NaN */
  K_INF,       /* random with +inf and/or -inf: s = inf */
  K_ALLNAN,    /* every element NaN: amax = 0, s = 1 */
  K_TINY,      /* subnormals of T: scales that underflow */
  K_HUGE,      /* the top binade of T */
  K_SPRINKLED, /* random with ~1% NaN and ~1% zeros */
  K_P2AMAX,    /* amax a power of two (one element), the rest below */
  K_P2SCALE,   /* amax = 2^e max (FP8) or 2^e qmax (integers): s = 2^e exactly */
  K_P2ABOVE,   /* amax one float of T above 2^e max (or qmax): s just above 2^e */
  NKINDS
};
static const char *const kind_names[NKINDS] = {"random", "edges", "zero",      "const",   "single",  "outlier",
                                               "nan",    "inf",   "allnan",    "tiny",    "huge",    "sprinkled",
                                               "p2amax", "p2scale", "p2above"};

static double rnd_mag(bq_dtype T)
{
  int e = T == BQ_F16 ? (int)rnd_range(-8, 12) : T == BQ_F64 ? (int)rnd_range(-100, 100) : (int)rnd_range(-40, 40);
  return ldexp(1.0, e);
}

static void gen_segment(const bq_desc *d, void *x, int64_t n, int kind)
{
  const bq_dtype T = d->float_type, I = d->int_type;
  int64_t i;
  if (n <= 0) return;
  switch (kind) {
  case K_RANDOM:
  case K_SPRINKLED:
  case K_NAN:
  case K_INF: {
    double m = rnd_mag(T);
    for (i = 0; i < n; i++) store_t(T, x, i, (2.0 * rnd_unit() - 1.0) * m);
    if (kind == K_SPRINKLED) {
      for (i = 0; i < n; i++) {
        uint64_t r = rnd() % 100;
        if (r == 0) store_bits(T, x, i, nan_bits(T));
        else if (r == 1) store_t(T, x, i, (rnd() & 1) ? 0.0 : -0.0);
      }
    } else if (kind == K_NAN) {
      for (i = 0; i < n; i++)
        if (rnd() % 5 == 0) store_bits(T, x, i, nan_bits(T));
    } else if (kind == K_INF) {
      int which = (int)(rnd() % 3); /* +inf, -inf, both */
      if (which != 1) store_bits(T, x, rnd_range(0, n - 1), inf_bits(T));
      if (which != 0) store_bits(T, x, rnd_range(0, n - 1), inf_bits(T) | sign_bit(T));
      if (n > 2 && (rnd() & 1)) store_bits(T, x, rnd_range(0, n - 1), nan_bits(T));
    }
    return;
  }
  case K_EDGES: {
    /* s = amax / max = u exactly: every element's quotient is its edge value */
    const int k = (int)ref_fp8_kind_of(I);
    const double u = pick_pow2_scale(T, I), mx = fmt_of(I)->max;
    for (i = 0; i < n; i++) {
      double v;
      int tries = 0;
      do v = g_edges[k][rnd() % (uint64_t)g_nedges[k]];
      while (!(fabs(v) <= mx) && ++tries < 16);
      if (!(fabs(v) <= mx)) v = 0.0;
      store_t(T, x, i, v * u);
    }
    store_t(T, x, rnd_range(0, n - 1), ((rnd() & 1) ? mx : -mx) * u);
    return;
  }
  case K_ZERO:
    for (i = 0; i < n; i++) store_t(T, x, i, (rnd() & 1) ? 0.0 : -0.0);
    return;
  case K_CONST: {
    double c = ((rnd() & 1) ? 1.0 : -1.0) * (1.0 + rnd_unit()) * rnd_mag(T);
    for (i = 0; i < n; i++) store_t(T, x, i, c);
    return;
  }
  case K_SINGLE:
    for (i = 0; i < n; i++) store_t(T, x, i, 0.0);
    store_t(T, x, rnd_range(0, n - 1), ((rnd() & 1) ? 1.0 : -1.0) * (0.5 + rnd_unit()) * rnd_mag(T));
    return;
  case K_OUTLIER: {
    double big = T == BQ_F16 ? 65504.0 : 1e30, m = T == BQ_F16 ? ldexp(1.0, (int)rnd_range(-8, 4)) : rnd_mag(T);
    if (m > 1e20) m = 1e20;
    for (i = 0; i < n; i++) store_t(T, x, i, (2.0 * rnd_unit() - 1.0) * m);
    store_t(T, x, rnd_range(0, n - 1), (rnd() & 1) ? big : -big);
    return;
  }
  case K_ALLNAN:
    for (i = 0; i < n; i++) store_bits(T, x, i, nan_bits(T));
    return;
  case K_TINY:
    for (i = 0; i < n; i++) store_bits(T, x, i, (rnd() & mant_mask(T)) | ((rnd() & 1) ? sign_bit(T) : 0));
    return;
  case K_P2AMAX:
  case K_P2SCALE:
  case K_P2ABOVE: {
    /* the largest |x|: 2^e, or 2^e times the type's top (max, or qmax), kept well inside T */
    const double top = kind == K_P2AMAX ? 1.0 : ref_is_fp8(I) ? fmt_of(I)->max : (double)(d->qmax > 0 ? d->qmax : 127);
    const double lim = T == BQ_F16 ? 32768.0 : T == BQ_F64 ? 0x1p1000 : 0x1p126;
    int e = T == BQ_F16 ? (int)rnd_range(-14, 12) : T == BQ_F64 ? (int)rnd_range(-200, 200) : (int)rnd_range(-60, 60);
    double a;
    while (ldexp(top, e) > lim) e--;
    a = ldexp(top, e);
    for (i = 0; i < n; i++) store_t(T, x, i, (2.0 * rnd_unit() - 1.0) * a * 0.9);
    i = rnd_range(0, n - 1);
    store_t(T, x, i, (rnd() & 1) ? a : -a);
    if (kind == K_P2ABOVE) bump_bits(T, x, i, 1);
    return;
  }
  case K_HUGE: {
    uint64_t top = max_bits(T) & ~mant_mask(T);
    for (i = 0; i < n; i++) {
      uint64_t b = (rnd() % 4 == 0) ? max_bits(T) : top | (rnd() & mant_mask(T));
      store_bits(T, x, i, b | ((rnd() & 1) ? sign_bit(T) : 0));
    }
    return;
  }
  default:
    return;
  }
}

/* kind < 0: every kind once, then mostly random segments with edge segments mixed in */
static int kind_of(int kind, int64_t s)
{
  static const int later[] = {K_RANDOM, K_RANDOM, K_RANDOM, K_EDGES,  K_EDGES, K_SPRINKLED, K_NAN,   K_OUTLIER,
                              K_ZERO,   K_CONST,  K_SINGLE, K_TINY,   K_HUGE,  K_INF,       K_ALLNAN, K_P2AMAX,
                              K_P2SCALE, K_P2ABOVE};
  if (kind >= 0) return kind;
  if (s < NKINDS) return (int)s;
  return PICK(later);
}

#define POISON 0xA5

typedef struct dcase {
  bq_desc d;
  bq_args a;
  int xoff, yoff, soff;
  int zp_null; /* out_zero_points NULL, else a poisoned buffer that must stay untouched */
  int kind;
} dcase;

typedef struct drun {
  dcase c;
  bq_desc dn;
  ref_layout L;
  int64_t nparams, ngroups;
  size_t ts, ss;
  dbuf x, y, sc, zp;
  unsigned char *ey, *es, *gy, *gs, *gz, *gx;
  bq_args ha, da;
  char what[768];
} drun;

static void d_describe(drun *R, const char *sku)
{
  const bq_desc *d = &R->dn;
  const bq_args *a = &R->c.a;
  int n = snprintf(R->what, sizeof R->what, "dynamic %s T=%s I=%s scale_type=%s%s amax_bound=%a | ",
                   gran_name(d->granularity), ref_dtype_name(d->float_type), ref_dtype_name(d->int_type),
                   ref_dtype_name(d->scale_type), d->pow2_scales ? " pow2_scales" : "", a->amax_bound);
  size_t k = n > 0 ? (size_t)n : 0;
  if (k < sizeof R->what) {
    if (d->granularity == BQ_PER_TENSOR)
      n = snprintf(R->what + k, sizeof R->what - k, "numel=%lld", (long long)a->numel);
    else
      n = snprintf(R->what + k, sizeof R->what - k, "rows=%lld cols=%lld x_row_stride=%lld y_row_stride=%lld",
                   (long long)a->rows, (long long)a->cols, (long long)a->x_row_stride, (long long)a->y_row_stride);
    k += n > 0 ? (size_t)n : 0;
  }
  if (k < sizeof R->what && d->granularity == BQ_PER_GROUP) {
    n = snprintf(R->what + k, sizeof R->what - k, " group_size=%lld group_row_stride=%lld",
                 (long long)a->group_size, (long long)a->group_row_stride);
    k += n > 0 ? (size_t)n : 0;
  }
  if (k < sizeof R->what)
    snprintf(R->what + k, sizeof R->what - k,
             " | offsets x=%d y=%d params=%d | out_zero_points=%s | content=%s | sku=%s | BQ_TEST_SEED=0x%llx",
             R->c.xoff, R->c.yoff, R->c.soff, R->c.zp_null ? "NULL" : "buffer",
             R->c.kind < 0 ? "mixed" : kind_names[R->c.kind], sku ? sku : "?", (unsigned long long)g_seed);
}

static void drun_init(drun *R, const dcase *c)
{
  int64_t r, g, s = 0;
  unsigned char *x0;
  memset(R, 0, sizeof *R);
  R->c = *c;
  R->dn = refd_desc_normalize(&c->d);
  edges_init(R->dn.int_type);
  d_describe(R, NULL);
  cr_assert_eq(ref_layout_init(&R->L, &R->dn, &c->a), 0, "bad test case (layout) | %s", R->what);
  R->ts = ref_dtype_size(R->dn.float_type);
  R->ss = ref_dtype_size(R->dn.scale_type);
  if (R->dn.granularity == BQ_PER_TENSOR) {
    R->nparams = c->a.numel > 0 ? 1 : 0;
  } else if (R->dn.granularity == BQ_PER_TOKEN) {
    R->nparams = R->L.count ? R->L.rows : 0;
  } else {
    R->ngroups = R->L.cols / R->L.group;
    R->nparams = R->L.n_params;
  }
  dbuf_make(&R->x, R->ts, R->L.x_extent, c->xoff);
  dbuf_make(&R->y, 1, R->L.y_extent, c->yoff);
  dbuf_make(&R->sc, R->ss, R->nparams, c->soff);
  if (!c->zp_null) dbuf_make(&R->zp, 4, R->nparams, c->soff);
  R->ey = (unsigned char *)malloc(R->y.total);
  R->gy = (unsigned char *)malloc(R->y.total);
  R->es = (unsigned char *)malloc(R->sc.total);
  R->gs = (unsigned char *)malloc(R->sc.total);
  R->gx = (unsigned char *)malloc(R->x.total);
  R->gz = c->zp_null ? NULL : (unsigned char *)malloc(R->zp.total);
  cr_assert(R->ey && R->gy && R->es && R->gs && R->gx && (c->zp_null || R->gz), "host malloc | %s", R->what);

  fill_garbage(R->x.h, R->x.total); /* guards and row gaps keep it: reading it would change a scale */
  x0 = R->x.h + R->x.pre;
  switch (R->dn.granularity) {
  case BQ_PER_TENSOR:
    gen_segment(&R->dn, x0, c->a.numel, kind_of(c->kind, 0));
    break;
  case BQ_PER_TOKEN:
    if (R->L.count)
      for (r = 0; r < R->L.rows; r++)
        gen_segment(&R->dn, x0 + (size_t)(r * R->L.xs) * R->ts, R->L.cols, kind_of(c->kind, s++));
    break;
  default:
    if (R->L.count)
      for (r = 0; r < R->L.rows; r++)
        for (g = 0; g < R->ngroups; g++)
          gen_segment(&R->dn, x0 + (size_t)(r * R->L.xs + g * R->L.group) * R->ts, R->L.group,
                      kind_of(c->kind, s++));
    break;
  }
  if (R->zp.h) memset(R->zp.h, POISON, R->zp.total); /* what must stay there */

  memset(R->ey, POISON, R->y.total);
  memset(R->es, POISON, R->sc.total);
  R->ha = c->a;
  R->ha.x = x0;
  R->ha.y = R->ey + R->y.pre;
  R->ha.out_scales = R->es + R->sc.pre;
  R->ha.out_zero_points = NULL;
  cr_assert_eq(refd_run(&R->dn, &R->ha), 0, "reference rejected the case | %s", R->what);

  R->da = c->a;
  R->da.x = R->x.dev + R->x.pre;
  R->da.y = R->y.dev + R->y.pre;
  R->da.out_scales = R->sc.dev + R->sc.pre;
  R->da.out_zero_points = c->zp_null ? NULL : (int32_t *)(void *)(R->zp.dev + R->zp.pre);
}

static void drun_free(drun *R)
{
  dbuf_free(&R->x);
  dbuf_free(&R->y);
  dbuf_free(&R->sc);
  dbuf_free(&R->zp);
  free(R->ey); free(R->gy); free(R->es); free(R->gs); free(R->gz); free(R->gx);
  memset(R, 0, sizeof *R);
}

static int param_where(const drun *R, int64_t p, char *buf, size_t cap)
{
  if (R->dn.granularity == BQ_PER_TENSOR) { snprintf(buf, cap, "tensor"); return 1; }
  if (R->dn.granularity == BQ_PER_TOKEN) { snprintf(buf, cap, "row %lld", (long long)p); return 1; }
  {
    int64_t r = p / R->L.grs, g = p % R->L.grs;
    if (g >= R->ngroups || r >= R->L.rows) return 0;
    snprintf(buf, cap, "row %lld group %lld", (long long)r, (long long)g);
    return 1;
  }
}

#define MSG_CAP 8192

static void seg_summary(const drun *R, int64_t p, char *buf, size_t cap)
{
  const unsigned char *x0 = R->x.h + R->x.pre;
  int64_t start, n;
  unsigned char sbuf[8];
  refd_qp q;
  if (R->dn.granularity == BQ_PER_TENSOR) { start = 0; n = R->c.a.numel; }
  else if (R->dn.granularity == BQ_PER_TOKEN) { start = p * R->L.xs; n = R->L.cols; }
  else { start = (p / R->L.grs) * R->L.xs + (p % R->L.grs) * R->L.group; n = R->L.group; }
  q = refd_params_b(&R->dn, R->c.a.amax_bound, x0 + (size_t)start * R->ts, n, sbuf, NULL, 0);
  snprintf(buf, cap, "[segment: n=%lld amax=%.17g -> C(s)=%.17g]", (long long)n, q.amax, q.sd);
}

static size_t d_compare_y(const drun *R, char *msg, size_t cap)
{
  size_t bad = 0, j;
  char e[80], g[80], v[80], w[256];
  for (j = 0; j < R->y.total; j++) {
    int64_t k = (int64_t)j - (int64_t)R->y.pre, lg, xi, yi, pi;
    if (R->ey[j] == R->gy[j]) continue;
    if (bad++ >= REPORT_MAX) continue;
    fmt_elem(e, sizeof e, R->dn.int_type, R->ey, (int64_t)j);
    fmt_elem(g, sizeof g, R->dn.int_type, R->gy, (int64_t)j);
    if (k < 0 || k >= R->L.y_extent) {
      ref__append(msg, cap, "  y buffer[%zu] (guard, y index %lld): expected %s got %s\n", j, (long long)k, e, g);
      continue;
    }
    lg = ref_layout_logical(&R->L, k, 1);
    if (lg < 0) {
      ref__append(msg, cap, "  y[%lld] (gap between rows): expected %s got %s\n", (long long)k, e, g);
      continue;
    }
    ref_layout_index(&R->L, lg, &xi, &yi, &pi);
    fmt_elem(v, sizeof v, R->dn.float_type, R->x.h + R->x.pre, xi);
    seg_summary(R, pi, w, sizeof w);
    ref__append(msg, cap, "  y[%lld] (row %lld col %lld) x=%s %s: expected %s got %s\n", (long long)k,
                (long long)(lg / (R->L.cols ? R->L.cols : 1)), (long long)(lg % (R->L.cols ? R->L.cols : 1)), v, w,
                e, g);
  }
  if (bad > REPORT_MAX) ref__append(msg, cap, "  ... %zu y bytes differ in all\n", bad);
  return bad;
}

static size_t d_compare_scales(const drun *R, char *msg, size_t cap)
{
  size_t bad = 0, j;
  int64_t last = INT64_MIN;
  char e[80], g[80], w[256], where[64];
  for (j = 0; j < R->sc.total; j++) {
    int64_t k = (int64_t)j - (int64_t)R->sc.pre, p;
    if (R->es[j] == R->gs[j]) continue;
    p = k >= 0 ? k / (int64_t)R->ss : -1 - (-k - 1) / (int64_t)R->ss;
    if (p == last) continue;
    last = p;
    if (bad++ >= REPORT_MAX) continue;
    if (p < 0 || p >= R->nparams) {
      ref__append(msg, cap, "  scales buffer byte %zu (guard, element %lld): expected 0x%02x got 0x%02x\n", j,
                  (long long)p, R->es[j], R->gs[j]);
      continue;
    }
    fmt_elem(e, sizeof e, R->dn.scale_type, R->es + R->sc.pre, p);
    fmt_elem(g, sizeof g, R->dn.scale_type, R->gs + R->sc.pre, p);
    if (!param_where(R, p, where, sizeof where)) {
      ref__append(msg, cap, "  scales[%lld] (padding between parameter rows): expected %s got %s\n", (long long)p,
                  e, g);
      continue;
    }
    seg_summary(R, p, w, sizeof w);
    ref__append(msg, cap, "  scales[%lld] (%s) %s: expected %s got %s\n", (long long)p, where, w, e, g);
  }
  if (bad > REPORT_MAX) ref__append(msg, cap, "  ... %zu scales differ in all\n", bad);
  return bad;
}

/* power-of-two tests: each dynamic case of a symmetric plan takes a random args.amax_bound */
static int g_bounds;

/* 0 a third of the time; else within the magnitudes gen_segment draws (often below a
   segment's amax), sometimes exactly a power of two, sometimes far above everything */
static double pick_bound(bq_dtype T)
{
  int r = (int)(rnd() % 12);
  if (r < 4) return 0.0;
  if (r == 4) return T == BQ_F16 ? 60000.0 : 1e30;
  if (r == 5) return ldexp(1.0, (int)rnd_range(-20, 20));
  return (1.0 + rnd_unit()) * rnd_mag(T) * (rnd() & 1 ? 1.0 : 0.25);
}

static void drun_case(const dcase *c0)
{
  dcase cc = *c0;
  const dcase *c = &cc;
  drun R;
  if (g_bounds && !cc.d.asymmetric) cc.a.amax_bound = pick_bound(cc.d.float_type);
  bq_plan *plan;
  void *ws = NULL;
  size_t wsb = 0, bad, i;
  char *msg;
  drun_init(&R, c);
  plan = hw_plan_get(&R.c.d, R.what);
  d_describe(&R, bq_plan_sku(plan));
  BQ_OK(bq_memcpy_to_device(R.x.dev, R.x.h, R.x.total), "%s", R.what);
  BQ_OK(bq_memset(R.y.dev, POISON, R.y.total), "%s", R.what);
  BQ_OK(bq_memset(R.sc.dev, POISON, R.sc.total), "%s", R.what);
  if (R.zp.dev) BQ_OK(bq_memset(R.zp.dev, POISON, R.zp.total), "%s", R.what);
  BQ_OK(bq_plan_can_implement(plan, &R.da), "%s", R.what);
  BQ_OK(bq_plan_workspace_size(plan, &R.da, &wsb), "%s", R.what);
  if (wsb) {
    BQ_OK(bq_malloc(&ws, wsb), "%s", R.what);
    BQ_OK(bq_memset(ws, POISON, wsb), "%s", R.what);
  }
  BQ_OK(bq_plan_run(plan, &R.da, ws, wsb, NULL), "%s", R.what);
  BQ_OK(bq_synchronize(NULL), "%s", R.what);
  if (ws) bq_free(ws);
  BQ_OK(bq_memcpy_to_host(R.gy, R.y.dev, R.y.total), "%s", R.what);
  BQ_OK(bq_memcpy_to_host(R.gs, R.sc.dev, R.sc.total), "%s", R.what);
  BQ_OK(bq_memcpy_to_host(R.gx, R.x.dev, R.x.total), "%s", R.what);
  if (R.zp.dev) BQ_OK(bq_memcpy_to_host(R.gz, R.zp.dev, R.zp.total), "%s", R.what);
  msg = (char *)malloc(MSG_CAP);
  cr_assert(msg != NULL);
  msg[0] = 0;
  bad = d_compare_scales(&R, msg, MSG_CAP);
  bad += d_compare_y(&R, msg, MSG_CAP);
  if (R.zp.dev) {
    for (i = 0; i < R.zp.total && R.gz[i] == POISON; i++) {}
    if (i < R.zp.total) {
      bad++;
      ref__append(msg, MSG_CAP, "  out_zero_points (symmetric: must stay untouched) changed at byte %zu\n", i);
    }
  }
  if (memcmp(R.gx, R.x.h, R.x.total)) {
    bad++;
    ref__append(msg, MSG_CAP, "  x (the input, with its guards and gaps) was modified\n");
  }
  if (bad) cr_assert_fail("%zu mismatches | %s\n%s", bad, R.what, msg);
  free(msg);
  drun_free(&R);
}

static dcase token_case(const bq_desc *d, int64_t rows, int64_t cols, int64_t xs, int64_t ys, int xoff, int yoff)
{
  dcase c;
  memset(&c, 0, sizeof c);
  c.d = *d;
  c.a.rows = rows;
  c.a.cols = cols;
  c.a.x_row_stride = xs;
  c.a.y_row_stride = ys;
  c.xoff = xoff;
  c.yoff = yoff;
  c.soff = (int)rnd_range(0, 3);
  c.zp_null = (int)(rnd() & 1);
  c.kind = -1;
  return c;
}

static dcase group_case(const bq_desc *d, int64_t rows, int64_t G, int64_t ngroups, int64_t grs, int64_t xs_pad,
                        int64_t ys_pad, int xoff, int yoff)
{
  dcase c = token_case(d, rows, G * ngroups, 0, 0, xoff, yoff);
  c.a.x_row_stride = xs_pad ? G * ngroups + xs_pad : 0;
  c.a.y_row_stride = ys_pad ? G * ngroups + ys_pad : 0;
  c.a.group_size = G;
  c.a.group_row_stride = grs;
  return c;
}

static dcase tensor_case(const bq_desc *d, int64_t numel, int xoff, int yoff, int kind)
{
  dcase c;
  memset(&c, 0, sizeof c);
  c.d = *d;
  c.a.numel = numel;
  c.xoff = xoff;
  c.yoff = yoff;
  c.soff = (int)rnd_range(0, 3);
  c.zp_null = (int)(rnd() & 1);
  c.kind = kind;
  return c;
}

static int64_t odd_pad(void) { return 2 * rnd_range(0, 20) + 1; }

static void dyn_token(const bq_desc *d)
{
  static const int64_t aligned_cols[] = {16, 256, 1024, 4096};
  static const int64_t odd_cols[] = {1, 2, 3, 7, 17, 31, 100, 257, 1000, 4095, 5001};
  const bq_dtype T = d->float_type;
  dcase c;
  int64_t cols;
  /* aligned, contiguous; every kind of row (amax = 0, NaN, inf, ...) among them */
  c = token_case(d, NKINDS + rnd_range(0, 16), PICK(aligned_cols), 0, 0, 0, 0);
  drun_case(&c);
  /* odd lengths, contiguous, x and y misaligned independently */
  c = token_case(d, NKINDS + rnd_range(0, 8), PICK(odd_cols), 0, 0, (int)rnd_range(0, 15), (int)rnd_range(0, 15));
  drun_case(&c);
  /* strided rows: odd padded strides, gaps checked */
  cols = PICK(odd_cols);
  c = token_case(d, NKINDS + rnd_range(0, 8), cols, cols + odd_pad(), cols + rnd_range(1, 40), (int)rnd_range(0, 15),
                 (int)rnd_range(0, 15));
  drun_case(&c);
  /* rows past what the kernel keeps on chip */
  cols = on_chip_of(T) + (rnd() & 1 ? vec_of(T) : 1);
  c = token_case(d, 3, cols, (rnd() & 1) ? cols + odd_pad() : 0, 0, (int)rnd_range(0, 15), (int)rnd_range(0, 15));
  {
    static const int long_kinds[] = {K_RANDOM, K_EDGES, K_NAN, K_OUTLIER};
    c.kind = PICK(long_kinds);
  }
  drun_case(&c);
  /* zero-size */
  c = token_case(d, 0, 16, 0, 0, 0, 0);
  drun_case(&c);
}

static void dyn_group(const bq_desc *d)
{
  static const int64_t odd_g[] = {1, 3, 5, 37, 48, 128, 4096};
  const int vec = vec_of(d->float_type);
  dcase c;
  int64_t G, ng;
  /* G a whole number of 16-byte accesses, aligned rows */
  G = (int64_t)vec << rnd_range(0, 5);
  ng = rnd_range(1, 6);
  c = group_case(d, NKINDS / 2 + rnd_range(0, 4), G, ng, ng + rnd_range(0, 3), (rnd() & 1) ? vec * rnd_range(1, 3) : 0,
                 rnd_range(0, 9), 0, (int)rnd_range(0, 15));
  drun_case(&c);
  /* odd G, misaligned x, odd strides, padded parameter rows */
  G = PICK(odd_g);
  ng = G >= 4096 ? 2 : 8192 / G < 6 ? 8192 / G : rnd_range(1, 6);
  c = group_case(d, rnd_range(3, 12), G, ng, ng + rnd_range(0, 3), odd_pad(), odd_pad(), (int)rnd_range(0, 15),
                 (int)rnd_range(0, 15));
  drun_case(&c);
  /* zero-size */
  c = group_case(d, 0, 16, 2, 0, 0, 0, 0, 0);
  drun_case(&c);
}

static void dyn_tensor(const bq_desc *d)
{
  static const int64_t sizes[] = {1, 2, 3, 17, 100, 1000, 4097, 12345};
  int k;
  for (k = 0; k < NKINDS; k++) {
    dcase c = tensor_case(d, PICK(sizes), (int)rnd_range(0, 15), (int)rnd_range(0, 15), k);
    drun_case(&c);
  }
  {
    dcase c = tensor_case(d, rnd_range(100000, 300000), (int)rnd_range(0, 15), (int)rnd_range(0, 15),
                          (rnd() & 1) ? K_SPRINKLED : K_EDGES);
    drun_case(&c);
    c = tensor_case(d, 0, 0, 0, K_RANDOM);
    drun_case(&c);
  }
}

static void run_dynamic(bq_granularity g, bq_dtype T)
{
  int ii, sti;
  gpu_begin();
  for (ii = 0; ii < 2; ii++)
    for (sti = 0; sti < (T == BQ_F32 ? 1 : 2); sti++) {
      bq_desc d;
      memset(&d, 0, sizeof d);
      d.op = BQ_DYNAMIC_QUANTIZE;
      d.granularity = g;
      d.float_type = T;
      d.int_type = k_fp8_types[ii];
      d.scale_type = sti ? BQ_F32 : T == BQ_F32 ? (ii ? BQ_F32 : BQ_DTYPE_DEFAULT) : T;
      if (g == BQ_PER_TOKEN) dyn_token(&d);
      else if (g == BQ_PER_GROUP) dyn_group(&d);
      else dyn_tensor(&d);
    }
}

#define DYNAMIC_TESTS(suite, gran)                    \
  Test(suite, f32) { run_dynamic(gran, BQ_F32); }     \
  Test(suite, f64) { run_dynamic(gran, BQ_F64); }     \
  Test(suite, f16) { run_dynamic(gran, BQ_F16); }     \
  Test(suite, bf16) { run_dynamic(gran, BQ_BF16); }

DYNAMIC_TESTS(fp8_dynamic_per_tensor, BQ_PER_TENSOR)
DYNAMIC_TESTS(fp8_dynamic_per_token, BQ_PER_TOKEN)
DYNAMIC_TESTS(fp8_dynamic_per_group, BQ_PER_GROUP)

/* Every kind of segment as whole rows (amax = 0 rows, NaN and inf elements, ...), strided. */
Test(fp8_dynamic_edges, every_kind_per_row)
{
  int ti, ii, k;
  gpu_begin();
  for (ti = 0; ti < 4; ti++)
    for (ii = 0; ii < 2; ii++) {
      bq_desc d;
      memset(&d, 0, sizeof d);
      d.op = BQ_DYNAMIC_QUANTIZE;
      d.granularity = BQ_PER_TOKEN;
      d.float_type = k_float_types[ti];
      d.int_type = k_fp8_types[ii];
      d.scale_type = ii ? k_float_types[ti] : BQ_F32;
      for (k = 0; k < NKINDS; k++) {
        static const int64_t cols[] = {1, 2, 17, 64, 333};
        int64_t n = PICK(cols);
        dcase c = token_case(&d, 3, n, (rnd() & 1) ? n + odd_pad() : 0, (rnd() & 1) ? n + odd_pad() : 0,
                             (int)rnd_range(0, 3), (int)rnd_range(0, 3));
        c.kind = k;
        drun_case(&c);
      }
    }
}

/* ==== UE8M0 scales, power-of-two dynamic scales, the amax bound ===================================== */

static const bq_dtype k_ue8m0_its[4] = {BQ_S8, BQ_U8, BQ_E4M3, BQ_E5M2};

/* Static ops with UE8M0 scale arrays (bytes 2^(e - 127); 0, 1, 126, 127, 128, 254 and 255
   = NaN in every array of 7 or more): every float type with two of the four storage types
   (rotating, so that each float type meets each storage type across the ops), every other
   shape of the granularity, fresh data with specials, and one large problem. */
static void run_ue8m0_static(bq_granularity g, bq_op op, bq_direction dir)
{
  int ti, j, k;
  gpu_begin();
  for (ti = 0; ti < 4; ti++)
    for (j = 0; j < 2; j++) {
      const bq_dtype T = k_float_types[ti], I = k_ue8m0_its[(ti + (int)op + (int)dir + 2 * j) % 4];
      gcase c;
      memset(&c, 0, sizeof c);
      c.d = static_desc(op, dir, g, T, I, BQ_UE8M0);
      for (k = (ti + j) % 2; k < n_cases(g); k += 2) {
        set_shape(&c, g, k);
        set_offsets(&c, k % 3);
        c.specials = k % 5 != 1;
        c.mode = MODE_RANDOM;
        c.poison = (rnd() & 1) ? 0xa5 : 0x5a;
        run_case(&c);
      }
      if (j == 0 && ti % 2 == (int)dir) {
        set_big_shape(&c, g, (ti + (int)op) & 1);
        set_offsets(&c, 2);
        c.specials = 1;
        c.poison = 0xa5;
        run_case(&c);
      }
    }
}

#define UE8M0_STATIC_SUITE(suite, gran)                                                          \
  Test(suite, quantize_forward) { run_ue8m0_static(gran, BQ_QUANTIZE, BQ_FORWARD); }             \
  Test(suite, quantize_backward) { run_ue8m0_static(gran, BQ_QUANTIZE, BQ_BACKWARD); }           \
  Test(suite, dequantize_forward) { run_ue8m0_static(gran, BQ_DEQUANTIZE, BQ_FORWARD); }         \
  Test(suite, dequantize_backward) { run_ue8m0_static(gran, BQ_DEQUANTIZE, BQ_BACKWARD); }       \
  Test(suite, fake_quantize_forward) { run_ue8m0_static(gran, BQ_FAKE_QUANTIZE, BQ_FORWARD); }   \
  Test(suite, fake_quantize_backward) { run_ue8m0_static(gran, BQ_FAKE_QUANTIZE, BQ_BACKWARD); }

UE8M0_STATIC_SUITE(ue8m0_per_channel, BQ_PER_CHANNEL)
UE8M0_STATIC_SUITE(ue8m0_per_token, BQ_PER_TOKEN)
UE8M0_STATIC_SUITE(ue8m0_per_group, BQ_PER_GROUP)

/* Dynamic quantize with power-of-two scales: UE8M0 out_scales (pow2_scales left 0 or set:
   implied), or pow2_scales = 1 with f32 or T scales; e4m3, e5m2 and s8 storage; every
   case with a random args.amax_bound (none a third of the time). The segments include
   amax = 0, NaN and inf elements (with a bound: a finite scale), amax a power of two,
   amax with s exactly a power of two and one float above it, tiny and huge data. */
static void run_pow2_dynamic(bq_granularity g, bq_dtype T)
{
  int ii, v;
  gpu_begin();
  g_bounds = 1;
  for (ii = 0; ii < 3; ii++)
    for (v = 0; v < 2; v++) {
      static const bq_dtype its[3] = {BQ_E4M3, BQ_E5M2, BQ_S8};
      bq_desc d;
      memset(&d, 0, sizeof d);
      d.op = BQ_DYNAMIC_QUANTIZE;
      d.granularity = g;
      d.float_type = T;
      d.int_type = its[ii];
      if (v == 0) {
        d.scale_type = BQ_UE8M0;
        d.pow2_scales = (int)(rnd() & 1);
      } else {
        d.scale_type = (ii + (int)g) % 2 ? T : BQ_F32;
        d.pow2_scales = 1;
      }
      if (g == BQ_PER_TOKEN) dyn_token(&d);
      else if (g == BQ_PER_GROUP) dyn_group(&d);
      else dyn_tensor(&d);
    }
  g_bounds = 0;
}

#define POW2_TESTS(suite, gran)                        \
  Test(suite, f32) { run_pow2_dynamic(gran, BQ_F32); } \
  Test(suite, f64) { run_pow2_dynamic(gran, BQ_F64); } \
  Test(suite, bf16) { run_pow2_dynamic(gran, BQ_BF16); }

POW2_TESTS(pow2_dynamic_per_tensor, BQ_PER_TENSOR)
POW2_TESTS(pow2_dynamic_per_token, BQ_PER_TOKEN)
POW2_TESTS(pow2_dynamic_per_group, BQ_PER_GROUP)

/* Every kind of segment as whole rows, with and without a bound, UE8M0 and pow2 f32 scales,
   every float type, e4m3 / e5m2 / s8; and the bound's own edges: inf elements with a bound
   (finite scale, saturated elements), a bound below every element (all saturate), a bound
   that is exactly the amax, the smallest and largest bounds of C. */
Test(pow2_dynamic_edges, every_kind_per_row)
{
  int ti, ii, k, v;
  gpu_begin();
  for (ti = 0; ti < 4; ti++)
    for (ii = 0; ii < 3; ii++)
      for (v = 0; v < 2; v++) {
        static const bq_dtype its[3] = {BQ_E4M3, BQ_E5M2, BQ_S8};
        const bq_dtype T = k_float_types[ti];
        bq_desc d;
        memset(&d, 0, sizeof d);
        d.op = BQ_DYNAMIC_QUANTIZE;
        d.granularity = BQ_PER_TOKEN;
        d.float_type = T;
        d.int_type = its[ii];
        d.scale_type = v ? BQ_F32 : BQ_UE8M0;
        d.pow2_scales = v;
        for (k = 0; k < NKINDS; k++) {
          static const int64_t cols[] = {1, 2, 17, 64, 333};
          const double tiny = T == BQ_F64 ? DBL_TRUE_MIN : FLT_TRUE_MIN, big = T == BQ_F64 ? DBL_MAX : FLT_MAX;
          const double bounds[] = {0.0, 1.0, 0x1p-10, 3.0, tiny, big, 1e-30, 448.0};
          int64_t n = PICK(cols);
          dcase c = token_case(&d, 3, n, (rnd() & 1) ? n + odd_pad() : 0, (rnd() & 1) ? n + odd_pad() : 0,
                               (int)rnd_range(0, 3), (int)rnd_range(0, 3));
          c.kind = k;
          c.a.amax_bound = bounds[(k + ti + ii) % 8];
          drun_case(&c);
          c.a.amax_bound = 0.0;
          drun_case(&c);
        }
        { /* inf elements with a bound (a finite scale); a bound equal to a segment's amax */
          dcase c = token_case(&d, 4, 40, 0, 0, 0, 0);
          c.kind = K_INF;
          c.a.amax_bound = 2.0;
          drun_case(&c);
          c.kind = K_P2SCALE;
          c.a.amax_bound = ref_is_fp8(d.int_type) ? fmt_of(d.int_type)->max : 127.0;
          drun_case(&c);
        }
      }
}

/* ==== the conversions, exhaustively ================================================================= */

/* Dequantize every code of each type with scale 1, every float type, hardware and software
   SKUs: T(ref_fp8_to_double(code)) exactly (any NaN for the NaN codes, +-inf for E5M2's). */
Test(fp8_conversions, dequantize_every_code)
{
  int ti, ii, soft, i;
  gpu_begin();
  for (ti = 0; ti < 4; ti++)
    for (ii = 0; ii < 2; ii++)
      for (soft = 0; soft < 2; soft++) {
        const bq_dtype T = k_float_types[ti], I = k_fp8_types[ii];
        const int n = 3 * 256 + 5, off = (int)rnd_range(0, 15);
        const size_t ts = ref_dtype_size(T);
        bq_desc d = static_desc(BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, T, I, BQ_DTYPE_DEFAULT);
        unsigned char codes[3 * 256 + 5], *exp, *got;
        void *dx = NULL, *dy = NULL;
        size_t ybytes = (size_t)(n + 2 * GUARD) * ts;
        bq_args a;
        bq_plan *p;
        char what[256], e[80], g[80], msg[4096];
        size_t bad = 0;
        snprintf(what, sizeof what, "dequantize every %s code to %s, scale 1, %s conversion SKU", ref_dtype_name(I),
                 ref_dtype_name(T), soft ? "software" : "hardware");
        p = soft ? soft_plan_get(&d, what) : hw_plan_get(&d, what);
        for (i = 0; i < n; i++) codes[i] = (uint8_t)(i < 256 ? i : i < 512 ? 511 - i : (i * 37) & 255);
        exp = (unsigned char *)malloc(ybytes);
        got = (unsigned char *)malloc(ybytes);
        cr_assert(exp && got);
        memset(exp, 0x5a, ybytes);
        for (i = 0; i < n; i++) store_t(T, exp + GUARD * ts, i, ref_fp8_to_double(codes[i], ref_fp8_kind_of(I)));
        BQ_OK(bq_malloc(&dx, (size_t)n + 64), "%s", what);
        BQ_OK(bq_malloc(&dy, ybytes), "%s", what);
        BQ_OK(bq_memcpy_to_device((unsigned char *)dx + off, codes, (size_t)n), "%s", what);
        BQ_OK(bq_memset(dy, 0x5a, ybytes), "%s", what);
        memset(&a, 0, sizeof a);
        a.x = (unsigned char *)dx + off;
        a.y = (unsigned char *)dy + GUARD * ts;
        a.numel = n;
        a.scale = 1.0;
        BQ_OK(bq_plan_run(p, &a, NULL, 0, NULL), "%s", what);
        BQ_OK(bq_synchronize(NULL), "%s", what);
        BQ_OK(bq_memcpy_to_host(got, dy, ybytes), "%s", what);
        msg[0] = 0;
        for (i = 0; i < n + 2 * GUARD; i++) {
          if (ref_elem_equal(T, exp, got, i)) continue;
          if (bad++ < REPORT_MAX) {
            fmt_elem(e, sizeof e, T, exp, i);
            fmt_elem(g, sizeof g, T, got, i);
            if (i < GUARD || i >= GUARD + n)
              ref__append(msg, sizeof msg, "  guard element %d: expected %s got %s\n", i, e, g);
            else
              ref__append(msg, sizeof msg, "  code 0x%02x: expected %s got %s\n", codes[i - GUARD], e, g);
          }
        }
        cr_assert(bad == 0, "%s (sku %s): %zu mismatches\n%s", what, bq_plan_sku(p), bad, msg);
        bq_free(dx);
        bq_free(dy);
        free(exp);
        free(got);
      }
}

#define EX_LOG2_CHUNK 28
#define EX_CHUNK ((size_t)1 << EX_LOG2_CHUNK)
#define EX_KEEP 8 /* examples kept per (type, conversion) */
#define EX_OUTS 4 /* e4m3 hardware, e4m3 software, e5m2 hardware, e5m2 software */

typedef struct ex_slice {
  uint32_t base;               /* the chunk's first bit pattern */
  size_t begin, end;           /* the slice of the chunk */
  float *x;                    /* fill phase: write x */
  const uint8_t *got[EX_OUTS]; /* compare phase: NULL where not run */
  uint64_t bad[EX_OUTS];
  int nex[EX_OUTS];
  uint32_t ex_bits[EX_OUTS][EX_KEEP];
  uint8_t ex_exp[EX_OUTS][EX_KEEP], ex_got[EX_OUTS][EX_KEEP];
  int phase;
} ex_slice;

static void *ex_work(void *arg)
{
  ex_slice *s = (ex_slice *)arg;
  size_t i;
  int o;
  if (s->phase == 0) {
    for (i = s->begin; i < s->end; i++) {
      uint32_t b = s->base + (uint32_t)i;
      memcpy(&s->x[i], &b, 4);
    }
    return NULL;
  }
  for (i = s->begin; i < s->end; i++) {
    uint32_t b = s->base + (uint32_t)i;
    float f;
    volatile float q;
    uint8_t exp[2];
    memcpy(&f, &b, 4);
    q = f / 1.0f; /* C(x) / C(s), as the kernel divides */
    exp[0] = ref_fp8_from_double((double)q, REF_E4M3);
    exp[1] = ref_fp8_from_double((double)q, REF_E5M2);
    for (o = 0; o < EX_OUTS; o++) {
      uint8_t g;
      if (!s->got[o]) continue;
      g = s->got[o][i];
      if (g == exp[o / 2]) continue;
      if (s->nex[o] < EX_KEEP) {
        s->ex_bits[o][s->nex[o]] = b;
        s->ex_exp[o][s->nex[o]] = exp[o / 2];
        s->ex_got[o][s->nex[o]] = g;
        s->nex[o]++;
      }
      s->bad[o]++;
    }
  }
  return NULL;
}

static void ex_parallel(ex_slice *sl, int nt)
{
  pthread_t th[64];
  int t;
  for (t = 0; t < nt; t++) cr_assert_eq(pthread_create(&th[t], NULL, ex_work, &sl[t]), 0, "pthread_create");
  for (t = 0; t < nt; t++) pthread_join(th[t], NULL);
}

/* Per-tensor quantize f32 -> e4m3 and -> e5m2, scale 1, over every f32 bit pattern, in
   chunks of 2^28: the hardware SKU (sm_89 and later) and the software SKU, each byte against
   ref_fp8_from_double. */
Test(fp8_conversions, quantize_every_f32, .timeout = 840)
{
  static const char *const out_names[EX_OUTS] = {"e4m3 hardware", "e4m3 software", "e5m2 hardware", "e5m2 software"};
  bq__CUcontext ctx;
  bq__device_info info;
  bq_plan *plans[EX_OUTS];
  void *dx = NULL, *dy[EX_OUTS] = {NULL, NULL, NULL, NULL};
  float *hx;
  uint8_t *hy[EX_OUTS] = {NULL, NULL, NULL, NULL};
  ex_slice *sl;
  uint64_t bad[EX_OUTS] = {0, 0, 0, 0}, total = 0;
  uint32_t exb[EX_OUTS][EX_KEEP];
  uint8_t exe[EX_OUTS][EX_KEEP], exg[EX_OUTS][EX_KEEP];
  int nex[EX_OUTS] = {0, 0, 0, 0}, hw, o, t, nt;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  uint64_t chunk;
  char msg[8192], sku[EX_OUTS][512];
  struct timespec t0, t1;
  gpu_begin();
  clock_gettime(CLOCK_MONOTONIC, &t0);
  BQ_OK(bq__current_device(0, &ctx, &info), "device");
  hw = info.sm >= 89;
  if (!hw) {
    cr_log_warn("fp8_conversions: the device is sm_%d (below sm_89, no cvt.rn.satfinite to FP8): only the "
                "software conversion is compared", info.sm);
    fprintf(stderr, "fp8_conversions: device sm_%d is below sm_89: hardware comparison skipped, software only\n",
            info.sm);
  }
  nt = ncpu < 1 ? 1 : ncpu > 64 ? 64 : (int)ncpu;
  for (o = 0; o < EX_OUTS; o++) {
    bq_desc d = static_desc(BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F32, k_fp8_types[o / 2], BQ_DTYPE_DEFAULT);
    plans[o] = NULL;
    snprintf(sku[o], sizeof sku[o], "(not run)");
    if (o % 2 == 0 && !hw) continue;
    if (o % 2) {
      plans[o] = soft_plan_select(&d, out_names[o]);
    } else {
      BQ_OK(bq_plan_select(&d, &plans[o]), "%s", out_names[o]);
      cr_assert(strstr(bq_plan_sku(plans[o]), ".soft") == NULL, "%s: SKU %s", out_names[o], bq_plan_sku(plans[o]));
    }
    snprintf(sku[o], sizeof sku[o], "%s", bq_plan_sku(plans[o]));
    BQ_OK(bq_malloc(&dy[o], EX_CHUNK), "%s", out_names[o]);
    hy[o] = (uint8_t *)malloc(EX_CHUNK);
    cr_assert(hy[o] != NULL, "host malloc(%zu)", EX_CHUNK);
  }
  BQ_OK(bq_malloc(&dx, EX_CHUNK * 4), "x chunk");
  hx = (float *)malloc(EX_CHUNK * 4);
  sl = (ex_slice *)calloc((size_t)nt, sizeof *sl);
  cr_assert(hx && sl, "host malloc");
  for (chunk = 0; chunk < ((uint64_t)1 << 32) / EX_CHUNK; chunk++) {
    const uint32_t base = (uint32_t)(chunk << EX_LOG2_CHUNK);
    bq_args a;
    for (t = 0; t < nt; t++) {
      memset(&sl[t], 0, sizeof sl[t]);
      sl[t].base = base;
      sl[t].begin = EX_CHUNK / (size_t)nt * (size_t)t;
      sl[t].end = t == nt - 1 ? EX_CHUNK : EX_CHUNK / (size_t)nt * (size_t)(t + 1);
      sl[t].x = hx;
      sl[t].phase = 0;
    }
    ex_parallel(sl, nt);
    BQ_OK(bq_memcpy_to_device(dx, hx, EX_CHUNK * 4), "chunk %llu", (unsigned long long)chunk);
    memset(&a, 0, sizeof a);
    a.x = dx;
    a.numel = (int64_t)EX_CHUNK;
    a.scale = 1.0;
    for (o = 0; o < EX_OUTS; o++) {
      if (!plans[o]) continue;
      BQ_OK(bq_memset(dy[o], (unsigned char)(0xA5 ^ chunk), EX_CHUNK), "%s", out_names[o]);
      a.y = dy[o];
      BQ_OK(bq_plan_run(plans[o], &a, NULL, 0, NULL), "%s chunk %llu", out_names[o], (unsigned long long)chunk);
    }
    BQ_OK(bq_synchronize(NULL), "chunk %llu", (unsigned long long)chunk);
    for (o = 0; o < EX_OUTS; o++)
      if (plans[o]) BQ_OK(bq_memcpy_to_host(hy[o], dy[o], EX_CHUNK), "%s", out_names[o]);
    for (t = 0; t < nt; t++) {
      for (o = 0; o < EX_OUTS; o++) sl[t].got[o] = hy[o];
      sl[t].phase = 1;
    }
    ex_parallel(sl, nt);
    for (t = 0; t < nt; t++) /* slices in index order: the first examples stay first */
      for (o = 0; o < EX_OUTS; o++) {
        int j;
        bad[o] += sl[t].bad[o];
        for (j = 0; j < sl[t].nex[o] && nex[o] < EX_KEEP; j++, nex[o]++) {
          exb[o][nex[o]] = sl[t].ex_bits[o][j];
          exe[o][nex[o]] = sl[t].ex_exp[o][j];
          exg[o][nex[o]] = sl[t].ex_got[o][j];
        }
      }
    total += EX_CHUNK;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  msg[0] = 0;
  for (o = 0; o < EX_OUTS; o++) {
    int j;
    if (!plans[o]) {
      ref__append(msg, sizeof msg, "  %s: not compared (device sm_%d)\n", out_names[o], info.sm);
      continue;
    }
    ref__append(msg, sizeof msg, "  %s (%s): %llu mismatches of %llu\n", out_names[o], sku[o],
                (unsigned long long)bad[o], (unsigned long long)total);
    for (j = 0; j < nex[o]; j++) {
      float f;
      memcpy(&f, &exb[o][j], 4);
      ref__append(msg, sizeof msg, "    x bits 0x%08x (%a): expected 0x%02x got 0x%02x\n", exb[o][j], (double)f,
                  exe[o][j], exg[o][j]);
    }
  }
  fprintf(stderr, "fp8_conversions/quantize_every_f32: %.1f s, %d host threads\n%s",
          (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec), nt, msg);
  for (o = 0; o < EX_OUTS; o++) {
    if (plans[o]) bq_plan_destroy(plans[o]);
    if (dy[o]) bq_free(dy[o]);
    free(hy[o]);
  }
  bq_free(dx);
  free(hx);
  free(sl);
  cr_assert(bad[0] + bad[1] + bad[2] + bad[3] == 0, "f32 -> FP8 over every bit pattern (scale 1):\n%s", msg);
}
