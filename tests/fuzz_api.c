/* fuzz_api.c - the public plan API under arbitrary descriptors and arguments, against the
   fake driver (tests/fake_driver.c) and the fake NVRTC (tests/fake_nvrtc.c), with every
   launch checked against the buffers the documentation tells a user to allocate.

   Built two ways: with libFuzzer (clang -fsanitize=fuzzer,address,undefined
   -DBQ_LIBFUZZER), and as a plain program (any C compiler) whose main() replays the files
   and directories it is given, so that the committed corpus runs in every build; the plain
   program's --self-test runs every enumerated plan instead (below).

   DESCRIPTORS come from the library's own enumeration: bq__all_descs(BQ__ALL_FAMILIES),
   the normalized desc of every kernel SKU of every family (affine, dynamic, linear, fused:
   each op, direction, granularity, float, storage and scale type, layout, symmetry,
   activation, pow2 option), which `warm --all` and the tests use. Edits then set any
   member of bq_desc: the desc is taken as its sizeof(bq_desc) / sizeof(int) int-sized
   members (every member is an int or an enum, checked at compile time), so a member added
   later is edited too without a change here. An edit writes a raw value, a small one, the
   old one plus a small delta, or the same member of another enumerated desc (a value the
   enumeration uses for that member). A raw desc is all members from the input.
   Every desc that validates is selected: the fake NVRTC "compiles" in microseconds an image
   the fake driver loads (the disk cache is off: BARACUDA_QUANT_DISABLE_CACHE=1), so select,
   lazy module loading (a run loading an entry point no select loaded) and
   BARACUDA_QUANT_LAZY=0 (an input bit) all run as on a GPU host.

   ARGUMENTS start from bq__typical_args (its fake pointers, 2^34 bytes apart) with the
   shape of one of a few small valid calls (valid_args: eight variants of rows, columns,
   groups, strides, alignment and optional buffers), then edits set any 8-byte slot of
   bq_args (sizeof(bq_args) / 8 of them: every member, whatever is added later) to a size
   (interesting values or raw 64-bit), a pointer (fake, aligned or not), a double, an int32,
   a small value, or the old value plus a small delta.

   THE INPUT decodes (missing bytes read as 0; u16, i32 and u64 little-endian) as:
     u8 kind % 4   0: an enumerated desc (u16 index, modulo the count), then u8 count % 8
                      edits of (u8 member, u8 how % 4, value: 0 i32 raw, 1 u16 index of the
                      desc to copy the member from, 2 i8 small, 3 i8 delta);
                   1: a raw desc, one i32 a member;  2: a NULL desc;  3: calls with a NULL plan
     u8 flags      bit 0: arguments start from a valid call (else zeros); bit 1: NULL args;
                   for the select, bit 2: BARACUDA_QUANT_LAZY=0, bit 3: BARACUDA_QUANT_WGMMA=0,
                   bit 4: BARACUDA_QUANT_FORCE_PTX=1 (PTX images, compute_90 SKUs); bits 5-7:
                   bq_sku also for sm 90, 80, 86, 89, 100, 87, 75 or 5
     u8 variant    the valid call (% 8)
     u8 workspace  % 5: 0 NULL, 1 what the plan asks, 2 one byte less, 3 misaligned, 4 huge
     u8 stream     0 NULL, else a fake stream
     then (u8 slot, u8 how % 6, value) edits of bq_args until the input ends: 0 a size (u8
     index into INTERESTING, small multiples of 4, or 255 then u64), 1 a pointer (u8: 0 NULL,
     1..31 typical-args regions, 32..159 misaligned by 1..8 bytes, 160..254 16-byte offsets,
     255 then u64), 2 a double (u8 index, or past the table u64 bits), 3 i32 (the slot's
     low half; the high half 0), 4 u8 small, 5 i8 delta.
   tests/make_fuzz_corpus.py writes the seed corpus in this format (its regress_* inputs
   reproduce the bugs the fuzzers found, among them the two signed overflows of issue 54:
   per block with B near 2^62 in bq__affine_flat, packed UE8M0 scales with no rows and a
   group_row_stride near 2^62 in bq__group_shape).

   THE BUFFER CHECKS. For a call that bq_plan_can_implement accepted, the fuzzer computes,
   from the header's manual alone (document()), the bytes a user must allocate behind each
   pointer argument (x, y, dy, dx, scales, zero_points, mask, out_scales, out_zero_points,
   w, w_scales, bias, w_sums, residual, norm_weight, out, and the workspace as
   bq_plan_workspace_size reported it), and registers them by role, with which of them the
   op may write. The fake driver hands every launch to a hook (on_launch) that knows the
   kernel by the name given to cuModuleGetFunction and decodes its parameter block (the
   host's mirrors bq_affine_params, bq_lean_params, bq_pair_params,
   bq_dynamic_params, bq_fused_params, bq_linear_params, bq_mx_params): from each pointer and the
   extents, strides, groups and layout the block tells the kernel, the byte range it may
   read or write (span: (rows - 1) * stride + cols elements; parameter arrays by
   granularity and layout, packed UE8M0 as whole int32 words). Each range must lie inside
   the registered buffer of its role, writes only in the writable ones; a kernel name the
   hook does not know fails too, so a new entry point must get a decoder. Every entry point
   gets this full extent check: bq_affine, _cols, _odd, _blocks, _flat, _narrow, _mask,
   _lean, _pair; bq_dynamic, _long, _reduce, _apply, _tiles, _tiles_rows; bq_fused_c1 .. c8,
   c2d, c8d, m4, m8, m4f, m8f, m16, long, staged; bq_gemv, bq_gemv32, bq_gemv64,
   bq_gemm_large, bq_gemm_wgmma, bq_fp8_gemm, bq_fp8_wgmma, bq_fp8_tma; bq_weight_sums; bq_mx16, bq_mx32, bq_mx_any, bq_mx_amax, bq_mx_lanes. It checks what the host tells a kernel, not
   the kernel's own indexing (tests/emulator runs that). QuantizedLinear's activation
   kernel writes, and its GEMM reads, inside the workspace.
   --self-test shows the checks can fail: for every enumerated desc (linear ones also with
   BARACUDA_QUANT_WGMMA=0 and with PTX) and each valid call variant, the call must be
   accepted, launch, and stay inside its buffers; every buffer but the workspace must be
   reached to its documented end (the decoders are no looser than the manual), and each
   touched buffer, registered one element short in turn, must be reported. It prints the
   launches checked by kernel (every entry point above but bq_fused_c2, which the corpus
   and the fuzzer reach).

   What fails the run (abort):
   - a launch outside the launch limits (the fake driver aborts), or a range outside the
     documented buffers (above), or a launch while no accepted call runs;
   - a rejection whose status is not BQ_ERROR_INVALID_ARGUMENT, BQ_ERROR_NOT_SUPPORTED or
     BQ_ERROR_INSUFFICIENT_WORKSPACE, or whose message names no field: it must contain
     "desc." or "args." or "workspace (", or be one of the NULL-argument messages of the
     function called ("bq_plan_select: desc is NULL", "<plan>: args is NULL", "...: plan
     is NULL"), or for bq_sku on another arch name the "sm (";
   - bq_plan_run disagreeing with bq_plan_can_implement: when the arguments are rejected,
     run must return the same status and message; when they are accepted, run may fail only
     for its workspace (BQ_ERROR_INSUFFICIENT_WORKSPACE or a misaligned one);
   - bq_plan_workspace_size refusing a shape can_implement accepted;
   - bq_plan_select and bq_sku disagreeing with validation on a descriptor's status, or a
     selected plan's desc other than the normalized one, its SKU not starting with bq_sku's,
     no precision guarantee, or (not linear) its SKU not parsing back to its desc
     (bq__desc_from_sku);
   - a crash, or what AddressSanitizer and UndefinedBehaviorSanitizer report. */
#define _GNU_SOURCE
#define BARACUDA_QUANT_IMPLEMENTATION
#define BARACUDA_QUANT_TOOLS /* bq__all_descs, bq__desc_from_sku and their kin */
#include "../baracuda_quant.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define DESC_MEMBERS ((int)(sizeof(bq_desc) / sizeof(int)))
#define ARGS_SLOTS ((int)(sizeof(bq_args) / 8))
/* the desc is edited as int-sized members: every member must be one */
_Static_assert(sizeof(bq_desc) % sizeof(int) == 0, "bq_desc is not a sequence of int-sized members");
_Static_assert(sizeof(bq_op) == sizeof(int) && sizeof(bq_dtype) == sizeof(int) &&
                   sizeof(bq_granularity) == sizeof(int) && sizeof(bq_scale_layout) == sizeof(int),
               "bq_desc's enums are not int-sized");
_Static_assert(sizeof(bq_args) % 8 == 0, "bq_args is not a sequence of 8-byte slots");

static void die(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_api: %s: %s\n", what, detail);
  abort();
}

/* ---- the input ------------------------------------------------------------------------- */
typedef struct reader { const uint8_t *p; size_t n; } reader;
static uint8_t u8(reader *r) {
  if (!r->n) return 0;
  r->n--;
  return *r->p++;
}
static uint16_t u16(reader *r) {
  uint16_t v = u8(r);
  return (uint16_t)(v | (uint16_t)u8(r) << 8);
}
static uint64_t u64(reader *r) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)u8(r) << (8 * i);
  return v;
}
static int32_t i32(reader *r) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)u8(r) << (8 * i);
  return (int32_t)v;
}

static const int64_t INTERESTING[] = {
  0, 1, 2, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 255, 256, 257, 1000, 4095, 4096, 65535, 65536,
  ((int64_t)1 << 24) - 1, (int64_t)1 << 24, ((int64_t)1 << 24) + 1, ((int64_t)1 << 27) + 3,
  0x7fffffffLL, 0x80000000LL, 0xffffffffLL, (int64_t)1 << 32, ((int64_t)1 << 39) - 1, (int64_t)1 << 39,
  ((int64_t)1 << 39) + 1, (int64_t)1 << 41, ((int64_t)1 << 56) - 1, (int64_t)1 << 56, ((int64_t)1 << 56) + 1,
  (int64_t)1 << 62, INT64_MAX, -1, -2, -4096, INT64_MIN, 32768, 32769, ((int64_t)1 << 30) + 1, (int64_t)1 << 61,
  ((int64_t)1 << 62) + 1, ((int64_t)1 << 54) + 1};
static int64_t size_value(reader *r) {
  uint8_t s = u8(r);
  if (s < NELEM(INTERESTING)) return INTERESTING[s];
  if (s < 255) return (int64_t)(s - NELEM(INTERESTING)) * 4;
  return (int64_t)u64(r);
}
/* fake device addresses (bq__typical_args' regions: 2^40 + k 2^34), never dereferenced */
static uint64_t region(int k) { return ((uint64_t)1 << 40) + (uint64_t)k * ((uint64_t)1 << 34); }
static uint64_t ptr_value(reader *r) {
  uint8_t s = u8(r);
  if (s == 0) return 0;
  if (s < 32) return region(s);
  if (s < 160) return region(s & 15) + (uint64_t)((s - 32) >> 4) + 1;
  if (s < 255) return region((s - 160) % 16) + 16 * (uint64_t)((s - 160) / 16 + 1);
  return u64(r);
}
static double double_value(reader *r) {
  static const double D[] = {0.25, 1.0, 0.0, -1.0, 1e-30, 1e-45, 1e-300, 3.5e38, 1e300, 1.0 / 0.0, -1.0 / 0.0,
                             0.0 / 0.0, 2.0, 0.1, 1e-6, 448.0, 4e38};
  uint8_t s = u8(r);
  if (s < NELEM(D)) return D[s];
  uint64_t bits = u64(r);
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

/* ---- the enumeration --------------------------------------------------------------------- */
static bq_desc *descs;
static int ndescs;
static unsigned long long (*launch_count)(void);
static void on_launch(const char *name, const unsigned dims[7], void **params, void *user);

static const char *beside_exe(const char *env, const char *file) {
  static char paths[2][4096];
  static int which;
  const char *e = getenv(env);
  if (e && *e) return e;
  char exe[2048];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) n = 0;
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (slash) *slash = 0;
  char *path = paths[which++ & 1];
  snprintf(path, sizeof paths[0], "%s/%s", exe, file);
  return path;
}

static int initialized;
static void setup(void) {
  if (initialized) return;
  initialized = 1;
  const char *drv = beside_exe("BQ_FAKE_DRIVER", "libbq_fake_driver.so");
  setenv("BARACUDA_QUANT_DRIVER", drv, 1);
  setenv("BARACUDA_QUANT_NVRTC", beside_exe("BQ_FAKE_NVRTC", "libbq_fake_nvrtc.so"), 1);
  setenv("BARACUDA_QUANT_DISABLE_CACHE", "1", 1);
  setenv("BARACUDA_QUANT_QUIET", "1", 1);
  setenv("FAKE_CUDA_OCCUPANCY", "2", 1); /* bq_fused_staged and the activation table's blocks */
  unsetenv("FAKE_CUDA_MODE");
  unsetenv("FAKE_CUDA_SM");
  unsetenv("BARACUDA_QUANT_LAZY");
  unsetenv("BARACUDA_QUANT_FORCE_PTX");
  /* the library opens the same file: one handle, one hook */
  void *h = dlopen(drv, RTLD_NOW | RTLD_GLOBAL);
  if (!h) die("cannot open the fake driver", dlerror());
  void (*set_hook)(void (*)(const char *, const unsigned *, void **, void *), void *) = NULL;
  *(void **)&set_hook = dlsym(h, "fake_cuda_set_launch_hook");
  *(void **)&launch_count = dlsym(h, "fake_cuda_launches");
  if (!set_hook || !launch_count) die("the fake driver lacks its test hooks", drv);
  set_hook(on_launch, NULL);
  ndescs = bq__all_descs(BQ__ALL_FAMILIES, NULL, 0);
  if (ndescs < 1) die("bq__all_descs", "no descriptors");
  descs = calloc((size_t)ndescs, sizeof *descs);
  if (!descs || bq__all_descs(BQ__ALL_FAMILIES, descs, ndescs) != ndescs) die("bq__all_descs", "out of memory");
  /* the scale modes an FP8 linear SKU serves at run time (the enumeration names it tensorwise):
     rowwise, blockwise, blockwise with MN-major activation scales; and FP8 QuantizedLinear per
     token and blockwise on it (whose SKU is the GEMM's, so the enumeration lists it once) */
  int nf8 = 0;
  for (int i = 0; i < ndescs; i++) nf8 += descs[i].op == BQ_FP8_LINEAR;
  bq_desc *more = realloc(descs, (size_t)(ndescs + 5 * nf8) * sizeof *descs);
  if (!more) die("bq__all_descs", "out of memory");
  descs = more;
  for (int i = 0, n = ndescs; i < n; i++)
    for (int m = 0; m < 5 && descs[i].op == BQ_FP8_LINEAR; m++) {
      bq_desc e = descs[i];
      e.granularity = m == 0 || m == 3 ? BQ_PER_TOKEN : BQ_PER_BLOCK;
      e.scale_layout = m == 2 ? BQ_SCALES_MN_MAJOR : BQ_SCALES_ROW_MAJOR;
      if (m >= 3) e.op = BQ_FP8_QUANTIZED_LINEAR; /* x of the output's type */
      descs[ndescs++] = e;
    }
}

/* ---- saturating byte arithmetic ------------------------------------------------------------ */
static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
static uint64_t sat_mul(uint64_t a, uint64_t b) { return a && b > UINT64_MAX / a ? UINT64_MAX : a * b; }
static uint64_t u(int64_t v) { return v < 0 ? 0 : (uint64_t)v; } /* (shapes here are validated: >= 0) */
/* elements of [rows, cols] with a row stride: (rows - 1) stride + cols */
static uint64_t span(int64_t rows, int64_t cols, int64_t stride) {
  if (rows <= 0 || cols <= 0) return 0;
  return sat_add(sat_mul(u(rows - 1), u(stride)), u(cols));
}
static uint64_t cdiv(uint64_t a, uint64_t b) { return b ? a / b + (a % b != 0) : 0; }

/* ---- the documented buffers of one accepted call ------------------------------------------- */
typedef struct buffer {
  const char *role;
  uint64_t base, bytes, elem;
  uint64_t reach; /* the farthest byte a launch was told it may touch, + 1 */
  int writable, touched;
} buffer;
static struct {
  const bq_plan *plan; /* the call running, NULL between calls */
  buffer buf[26];
  int nbuf;
  int shrink;         /* self-test: the buffer registered one element short (-1: none) */
  int record;         /* self-test: count violations instead of aborting */
  int violations;
  unsigned long long launches;
  char first[600];
} call = {.shrink = -1};

static void reg(const char *role, const void *ptr, uint64_t count, uint64_t elem, int writable) {
  if (!ptr || !count) return;
  if (call.nbuf == (int)NELEM(call.buf)) die("document", "too many buffers");
  buffer *b = &call.buf[call.nbuf];
  *b = (buffer){role, (uint64_t)(uintptr_t)ptr, sat_mul(count, elem), elem, 0, writable, 0};
  if (call.shrink == call.nbuf) b->bytes -= elem;
  call.nbuf++;
}

/* The count (elements, or bytes for packed UE8M0X4 whole words) of a per-group or per-block
   parameter array of the manual: scales [r][g] at r * ld + g (row-major; ld 0: the row's
   groups, packed: its words) or [g][r] at g * ld + r (MN-major; 0: rows rounded up to 4) */
static uint64_t group_doc(const bq_desc *d, const bq_args *a, int64_t rows, int64_t cols) {
  const int block = d->granularity == BQ_PER_BLOCK, mn = d->scale_layout == BQ_SCALES_MN_MAJOR;
  const int x4 = d->scale_type == BQ_UE8M0X4;
  const uint64_t B = u(a->group_size);
  const uint64_t ng = block ? cdiv(u(cols), B) : u(cols) / B, sr = block ? cdiv(u(rows), B) : u(rows);
  if (!ng || !sr) return 0;
  const uint64_t words = cdiv(ng, 4), lead = mn ? (x4 ? words : ng) : sr, inner = mn ? sr : (x4 ? words : ng);
  const uint64_t ld = a->group_row_stride ? u(a->group_row_stride) : mn ? cdiv(sr, 4) * 4 : inner;
  return sat_add(sat_mul(lead - 1, ld), inner); /* x4: words */
}
static uint64_t param_elem(const bq_desc *d) {
  return d->scale_type == BQ_UE8M0X4 ? 4 : (uint64_t)bq__dtype_size(d->scale_type);
}

/* The bytes of a microscaling scale array for [R rows, ng groups] in the manual's layout:
   [r][g] (ld: the groups), [g][r] (ld: rows rounded up to 4) or the blocked tiles'
   ceil(R / 128) 128 x ceil(ng / 4) 4 */
static uint64_t mx_scale_doc(const bq_desc *d, int64_t R, uint64_t ng, int64_t grs) {
  if (!ng || R <= 0) return 0;
  const int mn = d->scale_layout == BQ_SCALES_MN_MAJOR;
  const uint64_t ld = grs ? u(grs) : mn ? cdiv(u(R), 4) * 4 : ng;
  return d->scale_layout == BQ_SCALES_BLOCKED ? cdiv(u(R), 128) * 128 * cdiv(ng, 4) * 4
         : mn ? sat_add(sat_mul(ng - 1, ld), u(R)) : sat_add(sat_mul(u(R) - 1, ld), ng);
}

/* What the manual tells a user to allocate for an accepted call of plan p. */
static void document(const bq_plan *p, const bq_args *a, const void *ws, size_t need) {
  const bq_desc *d = &p->desc;
  const uint64_t T = (uint64_t)bq__dtype_size(d->float_type), I = (uint64_t)bq__dtype_size(d->int_type);
  const uint64_t S = param_elem(d);
  call.nbuf = 0;
  if (need) reg("workspace", ws, need, 1, 1);
  if (bq__op_in(d->op, "linear")) {
    /* x [M, K] (x_row_stride), y [M, N] (y_row_stride), w s8 [N, K], w_scales[N], bias[N],
       w_sums[N]; SmoothQuantLinear per token: scales[M], zero_points[M]; the sums: y int32 [N] */
    const int64_t M = a->rows, K = a->cols, N = a->n;
    if (d->op == BQ_LINEAR_WEIGHT_SUMS) {
      reg("w", a->w, sat_mul(u(N), u(K)), 1, 0);
      reg("y", a->y, u(N), 4, 1);
      return;
    }
    const uint64_t O = (uint64_t)bq__dtype_size(d->out_type), WS = (uint64_t)bq__dtype_size(d->scale_type);
    if (d->op == BQ_FP8_QUANTIZED_LINEAR) { /* float x [M, K], w [N, K]; w_scales[N] or blockwise [NB][KB] */
      const int64_t KB = (int64_t)cdiv(u(K), 128);
      reg("x", a->x, sat_mul(span(M, K, a->x_row_stride ? a->x_row_stride : K), T), 1, 0);
      reg("y", a->y, span(M, N, a->y_row_stride ? a->y_row_stride : N), O, 1);
      reg("w", a->w, sat_mul(u(N), u(K)), 1, 0);
      reg("w_scales", a->w_scales, d->granularity == BQ_PER_BLOCK ? sat_mul(cdiv(u(N), 128), u(KB)) : u(N), 4, 0);
      reg("bias", a->bias, u(N), O, 0);
      return;
    }
    if (d->op == BQ_FP8_LINEAR) { /* FP8 x [M, K], w [N, K]; f32 scales: one each, or scales[M], w_scales[N],
                                     or blockwise scales[M][KB] (MN-major [KB][M]), w_scales[NB][KB] */
      const int rw = d->granularity == BQ_PER_TOKEN, blk = d->granularity == BQ_PER_BLOCK;
      const int mn = d->scale_layout == BQ_SCALES_MN_MAJOR;
      const int64_t KB = (int64_t)cdiv(u(K), 128), lds = a->group_row_stride ? a->group_row_stride : mn ? (M + 3) / 4 * 4 : KB;
      reg("x", a->x, span(M, K, a->x_row_stride ? a->x_row_stride : K), 1, 0);
      reg("y", a->y, span(M, N, a->y_row_stride ? a->y_row_stride : N), O, 1);
      reg("w", a->w, sat_mul(u(N), u(K)), 1, 0);
      reg("scales", a->scales, blk ? (mn ? span(KB, M, lds) : span(M, KB, lds)) : rw ? u(M) : 1, 4, 0);
      reg("w_scales", a->w_scales, blk ? sat_mul(cdiv(u(N), 128), u(KB)) : rw ? u(N) : 1, 4, 0);
      reg("bias", a->bias, u(N), O, 0);
      return;
    }
    const int sq = d->op == BQ_SMOOTHQUANT_LINEAR;
    reg("x", a->x, span(M, K, a->x_row_stride ? a->x_row_stride : K), sq ? 1 : T, 0);
    reg("y", a->y, span(M, N, a->y_row_stride ? a->y_row_stride : N), O, 1);
    reg("w", a->w, sat_mul(u(N), u(K)), 1, 0);
    reg("w_scales", a->w_scales, u(N), WS, 0);
    reg("bias", a->bias, u(N), O, 0);
    if (d->asymmetric) reg("w_sums", a->w_sums, u(N), 4, 0);
    if (sq && d->granularity == BQ_PER_TOKEN) {
      reg("scales", a->scales, u(M), WS, 0);
      if (d->asymmetric) reg("zero_points", a->zero_points, u(M), 4, 0);
    }
    return;
  }
  if (bq__op_in(d->op, "fused")) {
    /* x [rows, cols] (RMSNorm) or [rows, 2 cols] (gated), y, residual, out [rows, cols] with
       their row strides, norm_weight [cols]; out_scales per token [rows], per group as
       scales */
    const int rms = d->op == BQ_RMSNORM_QUANTIZE, mx = bq__fused_mx(d); /* (microscaling: one-byte scales as
                                                                          the formats' own ops have them) */
    const int64_t R = a->rows, C = a->cols, IC = rms ? C : 2 * C;
    reg("x", a->x, span(R, IC, a->x_row_stride ? a->x_row_stride : IC), T, 0);
    const uint64_t ycodes = span(R, C, a->y_row_stride ? a->y_row_stride : C);
    reg("y", a->y, d->int_type == BQ_E2M1 ? cdiv(ycodes, 2) : ycodes, mx ? 1 : I, 1);
    if (rms) {
      reg("residual", a->residual, span(R, C, a->residual_row_stride ? a->residual_row_stride : C), T, 1);
      reg("norm_weight", a->norm_weight, u(C), T, 0);
    }
    reg("out", a->out, span(R, C, a->out_row_stride ? a->out_row_stride : C), T, 1);
    if (mx) {
      reg("out_scales", a->out_scales, mx_scale_doc(d, R, a->group_size > 0 ? u(C) / u(a->group_size) : 0,
                                                    a->group_row_stride), 1, 1);
      reg("tensor_scale", a->tensor_scale, 1, 4, 0);
      reg("out_tensor_scale", a->out_tensor_scale, 1, 4, 1);
    } else if (d->granularity != BQ_PER_TENSOR) {
      uint64_t n = d->granularity == BQ_PER_TOKEN ? u(R) : group_doc(d, a, R, C);
      reg("out_scales", a->out_scales, n, S, 1);
      if (d->asymmetric) reg("out_zero_points", a->out_zero_points, n, 4, 1);
    }
    return;
  }
  if (d->op == BQ_HADAMARD) { /* x and y [rows, cols], their row strides, floats */
    const uint64_t C = u(a->cols);
    reg("x", a->x, span(a->rows, a->cols, a->x_row_stride ? a->x_row_stride : a->cols), T, 0);
    reg("y", a->y, span(a->rows, a->cols, a->y_row_stride ? a->y_row_stride : a->cols), T, 1);
    (void)C;
    return;
  }
  if (bq__is_mx(d)) {
    /* the microscaling formats: [rows, cols] in groups along the row; codes a byte each, or
       E2M1 two a byte; one-byte scales [r][g] (ld: groups), [g][r] (ld: rows rounded up to
       4) or the blocked tiles' ceil(rows / 128) 128 x ceil(groups / 4) 4 bytes; NVFP4's
       tensor scale, one f32 */
    const int64_t R = a->rows, C = a->cols, G = a->group_size;
    const uint64_t ng = G > 0 ? u(C) / u(G) : 0;
    const uint64_t xs = u(a->x_row_stride ? a->x_row_stride : C), ys = u(a->y_row_stride ? a->y_row_stride : C);
    const int deq = d->op == BQ_DEQUANTIZE, e2 = d->int_type == BQ_E2M1;
    if (d->direction == BQ_BACKWARD) { /* dy [rows, cols] (y_row_stride), x and dx (x_row_stride), floats */
      reg("dy", a->dy, span(R, C, ys), T, 0);
      reg("dx", a->dx, span(R, C, xs), T, 1);
      if (!deq) reg("x", a->x, span(R, C, xs), T, 0);
    } else if (d->op == BQ_FAKE_QUANTIZE) {
      reg("x", a->x, span(R, C, xs), T, 0);
      reg("y", a->y, span(R, C, ys), T, 1);
    } else {
      const uint64_t fx = span(R, C, deq ? ys : xs), cx = span(R, C, deq ? xs : ys), cbytes = e2 ? cdiv(cx, 2) : cx;
      reg("x", a->x, deq ? cbytes : fx, deq ? 1 : T, 0);
      reg("y", a->y, deq ? fx : cbytes, deq ? T : 1, 1);
    }
    reg(d->op == BQ_DYNAMIC_QUANTIZE ? "out_scales" : "scales", d->op == BQ_DYNAMIC_QUANTIZE ? a->out_scales : a->scales,
        mx_scale_doc(d, R, ng, a->group_row_stride), 1, d->op == BQ_DYNAMIC_QUANTIZE);
    reg("tensor_scale", a->tensor_scale, 1, 4, 0);
    reg("out_tensor_scale", a->out_tensor_scale, 1, 4, 1);
    return;
  }
  /* quantize, dequantize, fake quantize, dynamic quantize: the granularity's shape */
  int64_t rows = 1, cols = 0, xs, ys;
  uint64_t nparams = 0;
  switch (d->granularity) {
  case BQ_PER_CHANNEL: {
    int64_t n = 1;
    for (int i = 0; i < a->rank; i++) n *= a->shape[i]; /* (validated: at most 2^56) */
    cols = n;
    nparams = u(a->shape[a->axis < 0 ? a->axis + a->rank : a->axis]);
    break;
  }
  case BQ_PER_TOKEN: case BQ_PER_GROUP: case BQ_PER_BLOCK:
    rows = a->rows;
    cols = a->cols;
    nparams = d->granularity == BQ_PER_TOKEN ? u(rows) : group_doc(d, a, rows, cols);
    break;
  default: /* per tensor */
    cols = a->numel;
    nparams = d->op == BQ_DYNAMIC_QUANTIZE; /* dynamic: out_scales[0] */
    break;
  }
  const int strided = d->granularity >= BQ_PER_TOKEN;
  xs = strided && a->x_row_stride ? a->x_row_stride : cols;
  ys = strided && a->y_row_stride ? a->y_row_stride : cols;
  if (d->op == BQ_DYNAMIC_QUANTIZE) {
    reg("x", a->x, span(rows, cols, xs), T, 0);
    reg("y", a->y, span(rows, cols, ys), I, 1);
    reg("out_scales", a->out_scales, nparams, S, 1);
    if (d->asymmetric) reg("out_zero_points", a->out_zero_points, nparams, 4, 1);
    return;
  }
  const int fwd = d->direction == BQ_FORWARD;
  if (fwd) {
    reg("x", a->x, span(rows, cols, xs), d->op == BQ_DEQUANTIZE ? I : T, 0);
    reg("y", a->y, span(rows, cols, ys), d->op == BQ_QUANTIZE ? I : T, 1);
  } else {
    reg("dy", a->dy, span(rows, cols, ys), T, 0);
    reg("dx", a->dx, span(rows, cols, xs), T, 1);
    if (d->op != BQ_DEQUANTIZE) reg("x", a->x, span(rows, cols, xs), T, 0);
  }
  /* the mask: ceil(numel / 32) 32-bit words, written forward, read backward */
  reg("mask", a->mask, cdiv(span(rows, cols, cols), 32), 4, fwd);
  if (d->granularity != BQ_PER_TENSOR) {
    reg("scales", a->scales, nparams, S, 0);
    reg("zero_points", a->zero_points, nparams, 4, 0);
  }
}

/* ---- the launch check ------------------------------------------------------------------------ */
static void violation(const char *fmt, ...) {
  char msg[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (call.record) {
    if (!call.violations++) snprintf(call.first, sizeof call.first, "%s", msg);
    return;
  }
  die("a launch outside the documented buffers", msg);
}

/* The range [ptr, ptr + bytes) a kernel is told it may touch (as role) must lie in that
   role's documented buffer. */
/* 1 while a plan's held plan's kernel is checked (dynamic quantize's stochastic rounding: the
   affine plan reads the scales and zero points the call writes) */
static int g_held;
/* the held plan's x where it is not the call's x (the fused producers' stochastic rounding
   and rotation: their values, in args.out or the workspace) */
static const char *g_held_x;
/* whether the running call passes a buffer of this role */
static int call_has(const char *role) {
  for (int i = 0; i < call.nbuf; i++)
    if (!strcmp(call.buf[i].role, role)) return 1;
  return 0;
}
static void touch(const char *kernel, const char *role, uint64_t ptr, uint64_t bytes, int write) {
  if (!bytes) return;
  if (g_held && !strcmp(role, "scales")) role = "out_scales";
  if (g_held && !strcmp(role, "zero_points")) role = "out_zero_points";
  if (g_held && g_held_x && !strcmp(role, "x")) role = g_held_x;
  const char *plan = call.plan ? call.plan->name : "?";
  for (int i = 0; i < call.nbuf; i++) {
    buffer *b = &call.buf[i];
    if (strcmp(b->role, role)) continue;
    b->touched = 1;
    if (ptr >= b->base && sat_add(ptr - b->base, bytes) > b->reach) b->reach = sat_add(ptr - b->base, bytes);
    if (ptr < b->base || ptr - b->base > b->bytes || bytes > b->bytes - (ptr - b->base))
      return violation("%s: %s %s %s [0x%llx, +%llu bytes), outside its documented %llu bytes at 0x%llx", plan,
                       kernel, write ? "writes" : "reads", role, (unsigned long long)ptr, (unsigned long long)bytes,
                       (unsigned long long)b->bytes, (unsigned long long)b->base);
    if (write && !b->writable)
      return violation("%s: %s writes %s, an input", plan, kernel, role);
    return;
  }
  violation("%s: %s %s %s [0x%llx, +%llu bytes), which the call does not pass (NULL, or none documented)", plan,
            kernel, write ? "writes" : "reads", role, (unsigned long long)ptr, (unsigned long long)bytes);
}

/* a parameter array's extent as the host describes it to the kernels: count (elements; bytes
   for packed UE8M0, as whole words) for [rows, cols] in parameter blocks of `group` with
   leading dimension grs (bq_pbase's: bytes for packed scales) */
static uint64_t params_extent(const bq_desc *d, int64_t rows, int64_t cols, int64_t group, int64_t gmod,
                              int64_t grs, int64_t ngroups) {
  const int x4 = d->scale_type == BQ_UE8M0X4, mn = d->scale_layout == BQ_SCALES_MN_MAJOR;
  switch (d->granularity) {
  case BQ_PER_CHANNEL: return u(gmod);
  case BQ_PER_TOKEN: return u(rows);
  case BQ_PER_GROUP: case BQ_PER_BLOCK: {
    const int block = d->granularity == BQ_PER_BLOCK;
    const uint64_t ng = ngroups ? u(ngroups) : block ? cdiv(u(cols), u(group)) : u(cols) / u(group);
    const uint64_t sr = block ? cdiv(u(rows), u(group)) : u(rows);
    if (!ng || !sr) return 0;
    if (!x4) return mn ? sat_add(sat_mul(ng - 1, u(grs)), sr) : sat_add(sat_mul(sr - 1, u(grs)), ng);
    /* bytes, whole words: row-major r grs + g, MN-major (g / 4) grs + 4 r + g % 4 */
    return mn ? sat_add(sat_mul((ng - 1) / 4, u(grs)), 4 * sr) : sat_add(sat_mul(sr - 1, u(grs)), 4 * cdiv(ng, 4));
  }
  default: return 0;
  }
}
static uint64_t params_bytes(const bq_desc *d, uint64_t extent) {
  return d->scale_type == BQ_UE8M0X4 ? extent : sat_mul(extent, (uint64_t)bq__dtype_size(d->scale_type));
}

static void check_affine(const char *name, const bq_desc *d, const void *params) {
  const uint64_t T = (uint64_t)bq__dtype_size(d->float_type), I = (uint64_t)bq__dtype_size(d->int_type);
  const int fwd = d->direction == BQ_FORWARD, deq = d->op == BQ_DEQUANTIZE;
  const uint64_t in0 = fwd && deq ? I : T, out = fwd && d->op == BQ_QUANTIZE ? I : T;
  const int lean = !strcmp(name, "bq_affine_lean"), pair = !strcmp(name, "bq_affine_pair");
  if (lean || pair) { /* forward, one dense array of n elements, parameters at e / group (per
                         block at (r / B) * grs + c / B, from the geometry after the block) */
    bq_lean_block_params lp;
    bq_pair_block_params pp;
    uint64_t n, g, x, y, sc, zps = 0, cols = 0, grs = 0;
    const int blk = d->granularity == BQ_PER_BLOCK;
    if (lean) {
      memcpy(&lp, params, blk ? sizeof lp : sizeof lp.l);
      n = lp.l.n, g = lp.l.fd_group.d, x = lp.l.in0, y = lp.l.out, sc = lp.l.scales, zps = lp.l.zps;
      cols = lp.fd_cols.d, grs = lp.grs;
      if ((uint64_t)lp.l.accesses * (uint64_t)call.plan->vec > n + (uint64_t)call.plan->vec)
        violation("%s: %s: %u accesses for %llu elements", call.plan->name, name, lp.l.accesses, (unsigned long long)n);
    } else {
      memcpy(&pp, params, blk ? sizeof pp : sizeof pp.l);
      n = (uint64_t)pp.l.pairs * 2 * (uint64_t)call.plan->vec, g = pp.l.fd_group.d, x = pp.l.in0, y = pp.l.out;
      sc = pp.l.scales, cols = pp.fd_cols.d, grs = pp.grs;
    }
    if (!fwd) violation("%s: %s launched for a backward plan", call.plan->name, name);
    touch(name, "x", x, sat_mul(n, in0), 0);
    touch(name, "y", y, sat_mul(n, out), 1);
    if (blk) {
      if (!g || !cols) return violation("%s: %s: blocks of %llu elements, rows of %llu", call.plan->name, name,
                                        (unsigned long long)g, (unsigned long long)cols);
      /* the last row's last block, in a layout of grs scales a row of blocks */
      const uint64_t rows = cdiv(n, cols), e = (cdiv(rows, g) - 1) * grs + cdiv(cols, g);
      touch(name, "scales", sc, params_bytes(d, e), 0);
      if (zps) touch(name, "zero_points", zps, sat_mul(e, 4), 0);
      return;
    }
    if (d->granularity != BQ_PER_TENSOR) {
      if (!g) return violation("%s: %s: parameter blocks of 0 elements", call.plan->name, name);
      const uint64_t np = params_bytes(d, d->scale_type == BQ_UE8M0X4 ? 4 * cdiv(cdiv(n, g), 4) : cdiv(n, g));
      touch(name, "scales", sc, np, 0);
      if (zps) touch(name, "zero_points", zps, sat_mul(cdiv(n, g), 4), 0);
    }
    return;
  }
  bq_affine_params k;
  memcpy(&k, params, sizeof k);
  const int mask = !strcmp(name, "bq_affine_mask");
  touch(name, fwd ? "x" : "dy", k.in0, sat_mul(span(k.rows, k.cols, k.in0_stride), in0), 0);
  if (!fwd && !deq && !mask) touch(name, "x", k.in1, sat_mul(span(k.rows, k.cols, k.in1_stride), T), 0);
  touch(name, fwd ? "y" : "dx", k.out, sat_mul(span(k.rows, k.cols, k.out_stride), out), 1);
  if (mask) touch(name, "mask", k.mask, sat_mul(cdiv(span(k.rows, k.cols, k.cols), 32), 4), fwd);
  if (d->granularity == BQ_PER_TENSOR) return;
  if (d->granularity != BQ_PER_CHANNEL && d->granularity != BQ_PER_TOKEN && k.group < 1)
    return violation("%s: %s: parameter blocks of %lld elements", call.plan->name, name, (long long)k.group);
  const uint64_t e = params_extent(d, k.rows, k.cols, k.group, k.gmod, k.grs, 0);
  touch(name, "scales", k.scales, params_bytes(d, e), 0);
  if (k.zps) touch(name, "zero_points", k.zps, sat_mul(e, 4), 0);
}

static void check_dynamic(const char *name, const bq_desc *d, const void *params, int in_workspace) {
  bq_dynamic_params k;
  memcpy(&k, params, sizeof k);
  const uint64_t T = (uint64_t)bq__dtype_size(d->float_type), I = (uint64_t)bq__dtype_size(d->int_type);
  const char *out = in_workspace ? "workspace" : "y";
  if ((d->granularity == BQ_PER_GROUP || d->granularity == BQ_PER_BLOCK) && k.group < 1)
    return violation("%s: %s: parameter blocks of %lld elements", call.plan->name, name, (long long)k.group);
  touch(name, "x", k.x, sat_mul(span(k.rows, k.cols, k.xs), T), 0);
  touch(name, out, k.y, sat_mul(span(k.rows, k.cols, k.ys), I), 1);
  uint64_t e = d->granularity == BQ_PER_TENSOR ? 1 : params_extent(d, k.rows, k.cols, k.group, 0, k.grs, k.ngroups);
  touch(name, in_workspace ? "workspace" : "out_scales", k.scales, params_bytes(d, e), 1);
  if (d->asymmetric) touch(name, in_workspace ? "workspace" : "out_zero_points", k.zps, sat_mul(e, 4), 1);
  if (d->granularity == BQ_PER_TENSOR) {
    if (k.nblocks < 1) violation("%s: %s: %d partials", call.plan->name, name, k.nblocks);
    touch(name, "workspace", k.partial, sat_mul(u(k.nblocks), 16), 1);
  }
}

static void check_fused(const char *name, const bq_desc *d, const void *params, unsigned grid) {
  bq_fused_params k;
  memcpy(&k, params, sizeof k);
  const uint64_t T = (uint64_t)bq__dtype_size(d->float_type), I = (uint64_t)bq__dtype_size(d->int_type);
  const int rms = d->op == BQ_RMSNORM_QUANTIZE, mx = bq__fused_mx(d), amax = !strcmp(name, "bq_fused_amax");
  touch(name, "x", k.x, sat_mul(span(k.rows, rms ? k.cols : 2 * k.cols, k.xs), T), 0);
  if (k.res) touch(name, "residual", k.res, sat_mul(span(k.rows, k.cols, k.rs), T), !amax);
  if (rms) touch(name, "norm_weight", k.w, sat_mul(u(k.cols), T), 0);
  if (amax) { /* NVFP4's amax launches: a partial a block, then their reduction after them */
    if (!bq__fused_nv(d) || k.tensor_scale) violation("%s: %s launched for another plan or call", call.plan->name, name);
    touch(name, "workspace", k.amax, sat_mul(k.nparts ? u(k.nparts) + 1 : grid, 4), 1);
    return;
  }
  /* (stochastic rounding or the rotation without args.out: the values go to the workspace,
     for the held plan) */
  if (k.out) touch(name, (d->rounding == BQ_ROUND_STOCHASTIC || d->rotation) && !call_has("out") ? "workspace" : "out", k.out,
                   sat_mul(span(k.rows, k.cols, k.os), T), 1);
  if (d->granularity == BQ_PER_GROUP && k.group < 1)
    return violation("%s: %s: groups of %lld elements", call.plan->name, name, (long long)k.group);
  if (mx) { /* codes (E2M1 two a byte), one-byte scales in the layout, NVFP4's tensor scale */
    const uint64_t codes = span(k.rows, k.cols, k.ys);
    touch(name, "y", k.y, d->int_type == BQ_E2M1 ? cdiv(codes, 2) : codes, 1);
    touch(name, "out_scales", k.scales, mx_scale_doc(d, k.rows, u(k.cols) / u(k.group), k.grs), 1);
    if (bq__fused_nv(d) && k.tensor_scale) touch(name, "tensor_scale", k.tensor_scale, 4, 0);
    if (bq__fused_nv(d) && !k.tensor_scale) {
      touch(name, "workspace", k.amax, 4, 0);
      touch(name, "out_tensor_scale", k.out_tensor_scale, 4, 1);
    }
    return;
  }
  touch(name, "y", k.y, sat_mul(span(k.rows, k.cols, k.ys), I), 1);
  if (d->granularity == BQ_PER_TENSOR) return;
  const uint64_t e = params_extent(d, k.rows, k.cols, k.group, 0, k.grs, 0);
  touch(name, "out_scales", k.scales, params_bytes(d, e), 1);
  if (d->asymmetric) touch(name, "out_zero_points", k.zps, sat_mul(e, 4), 1);
}

/* bq_fp8_tma's tensor maps (tests/fake_driver.c's encoding): each names x or w as the
   parameter block does, and what it spans lies in the buffer */
static void check_tensor_map(const char *name, const char *role, const bq_u64 m[16], uint64_t base, int64_t rows,
                             int64_t k, int64_t ld) {
  if (m[0] != 0x50414d54454b4146ull)
    return violation("%s: %s: the %s tensor map is not the driver's", call.plan->name, name, role);
  if (m[1] != base || (int64_t)m[2] != k || (int64_t)m[3] != rows || (int64_t)m[4] != ld)
    return violation("%s: %s: the %s tensor map (%llu rows of %llu bytes, %llu apart) differs from the parameters "
                     "(%lld of %lld, %lld)", call.plan->name, name, role, (unsigned long long)m[3],
                     (unsigned long long)m[2], (unsigned long long)m[4], (long long)rows, (long long)k, (long long)ld);
  touch(name, role, m[1], span((int64_t)m[3], (int64_t)m[2], (int64_t)m[4]), 0);
}

static void check_linear(const char *name, const bq_desc *d, const void *params) {
  bq_linear_params k;
  if (!strncmp(name, "bq_fp8_tma", 10)) { /* the tensor maps, then the parameter block after them */
    bq_fp8_tma_params t;
    memcpy(&t, params, sizeof t);
    k = t.p;
    const int fql = d->op == BQ_FP8_QUANTIZED_LINEAR;
    check_tensor_map(name, fql ? "workspace" : "x", t.tmap_a, k.a, k.m, k.k, k.lda);
    check_tensor_map(name, "w", t.tmap_w, k.w, k.n, k.k, k.k);
  } else {
    memcpy(&k, params, sizeof k);
  }
  if (d->op == BQ_LINEAR_WEIGHT_SUMS) {
    touch(name, "w", k.w, sat_mul(u(k.n), u(k.k)), 0);
    touch(name, "y", k.w_sums, sat_mul(u(k.n), 4), 1);
    return;
  }
  const int ql = d->op == BQ_QUANTIZED_LINEAR;
  const uint64_t O = (uint64_t)bq__dtype_size(d->out_type), S = (uint64_t)bq__dtype_size(d->scale_type);
  if (d->op == BQ_FP8_LINEAR || d->op == BQ_FP8_QUANTIZED_LINEAR) {
    const int fql = d->op == BQ_FP8_QUANTIZED_LINEAR; /* x and its scales: in the workspace */
    if (!(k.flags & BQ_LF_K0)) {
      touch(name, fql ? "workspace" : "x", k.a, span(k.m, k.k, k.lda), 0);
      touch(name, "w", k.w, sat_mul(u(k.n), u(k.k)), 0);
    }
    touch(name, "y", k.y, sat_mul(span(k.m, k.n, k.ldy), O), 1);
    const int64_t kb = (int64_t)cdiv(u(k.k), 128); /* blockwise: the K blocks' scales */
    if (k.flags & BQ_LF_BLOCK) {
      touch(name, fql ? "workspace" : "scales", k.a_scales, sat_mul((k.flags & BQ_LF_SA_MN) ? span(kb, k.m, (int64_t)k.w_sums) : span(k.m, kb, (int64_t)k.w_sums), 4), 0);
      touch(name, "w_scales", k.w_scales, sat_mul(sat_mul(cdiv(u(k.n), 128), u(kb)), 4), 0);
    } else {
      if (!fql || !(k.flags & BQ_LF_K0))
        touch(name, fql ? "workspace" : "scales", k.a_scales, (k.flags & BQ_LF_SA_ROW) ? sat_mul(u(k.m), 4) : 4, 0);
      touch(name, "w_scales", k.w_scales, (k.flags & BQ_LF_SW_ROW) ? sat_mul(u(k.n), 4) : 4, 0);
    }
    if (k.flags & BQ_LF_BIAS) touch(name, "bias", k.bias, sat_mul(u(k.n), O), 0);
    return;
  }
  if (!(k.flags & BQ_LF_K0)) {
    touch(name, ql ? "workspace" : "x", k.a, span(k.m, k.k, k.lda), 0);
    touch(name, "w", k.w, sat_mul(u(k.n), u(k.k)), 0);
  }
  touch(name, "y", k.y, sat_mul(span(k.m, k.n, k.ldy), O), 1);
  touch(name, "w_scales", k.w_scales, sat_mul(u(k.n), S), 0);
  if (k.flags & BQ_LF_BIAS) touch(name, "bias", k.bias, sat_mul(u(k.n), O), 0);
  if (k.flags & BQ_LF_SA_ROW) touch(name, ql ? "workspace" : "scales", k.a_scales, sat_mul(u(k.m), ql ? 4 : S), 0);
  if (k.flags & BQ_LF_ZP_ROW) touch(name, ql ? "workspace" : "zero_points", k.a_zps, sat_mul(u(k.m), 4), 0);
  if (k.flags & BQ_LF_ZP) touch(name, "w_sums", k.w_sums, sat_mul(u(k.n), 4), 0);
}

static void check_rotate(const char *name, const bq_desc *d, const void *params) {
  bq_rotate_params k;
  memcpy(&k, params, sizeof k);
  const uint64_t T = (uint64_t)bq__dtype_size(d->float_type);
  if (k.log2n < 1 || k.log2n > 8 || k.cols % ((int64_t)1 << k.log2n))
    return violation("%s: %s: blocks of 2^%d a row of %lld", call.plan->name, name, k.log2n, (long long)k.cols);
  touch(name, "x", k.x, sat_mul(span(k.rows, k.cols, k.xs), T), 0);
  touch(name, "y", k.y, sat_mul(span(k.rows, k.cols, k.ys), T), 1);
}

static void check_mx(const char *name, const bq_desc *d, const void *params) {
  bq_mx_params k;
  memcpy(&k, params, sizeof k);
  const uint64_t T = (uint64_t)bq__dtype_size(d->float_type);
  const int deq = d->op == BQ_DEQUANTIZE, dyn = d->op == BQ_DYNAMIC_QUANTIZE, e2 = d->int_type == BQ_E2M1;
  if (!strcmp(name, "bq_mx_amax")) {
    if (!dyn || d->scale_type != BQ_E4M3) violation("%s: %s launched for another plan", call.plan->name, name);
    if (k.nparts < 1) return violation("%s: %s: %d partials", call.plan->name, name, k.nparts);
    touch(name, "workspace", k.amax, sat_mul(u(k.nparts), 4), !k.finish);
    if (k.finish) touch(name, "out_tensor_scale", k.out_tensor_scale, 4, 1);
    else touch(name, "x", k.x, sat_mul(span(k.rows, k.cols, k.xs), T), 0);
    return;
  }
  if (k.group < 1 || k.pgroups < k.ngroups || k.ngroups * k.group != k.cols)
    return violation("%s: %s: groups of %lld, %lld (walked %lld) a row of %lld", call.plan->name, name,
                     (long long)k.group, (long long)k.ngroups, (long long)k.pgroups, (long long)k.cols);
  if (d->direction == BQ_BACKWARD) {
    touch(name, "dy", k.dy, sat_mul(span(k.rows, k.cols, k.ys), T), 0);
    touch(name, "dx", k.dx, sat_mul(span(k.rows, k.cols, k.xs), T), 1);
    if (!deq) touch(name, "x", k.x, sat_mul(span(k.rows, k.cols, k.xs), T), 0);
  } else if (d->op == BQ_FAKE_QUANTIZE) {
    touch(name, "x", k.x, sat_mul(span(k.rows, k.cols, k.xs), T), 0);
    touch(name, "y", k.y, sat_mul(span(k.rows, k.cols, k.ys), T), 1);
  } else {
    const uint64_t fx = span(k.rows, k.cols, deq ? k.ys : k.xs), cx = span(k.rows, k.cols, deq ? k.xs : k.ys);
    const uint64_t cb = e2 ? cdiv(cx, 2) : cx;
    touch(name, "x", k.x, deq ? cb : sat_mul(fx, T), 0);
    touch(name, "y", k.y, deq ? sat_mul(fx, T) : cb, 1);
  }
  /* the scales the walk reaches: rows of pgroups items (the blocked padding: whole tiles);
     bq_mx_lanes: items are rows of ppr pieces of 16 bytes of floats (2^lacc of them a lane:
     two only for quantize forward without the rotation, in groups of two or more, the codes'
     base and row stride on two pieces' grid), 2^lshift a group, and dynamic quantize into
     the blocked layout writes the padding of prows rows */
  uint64_t wrows = k.pgroups ? u(k.items) / u(k.pgroups) : 0;
  if (!strcmp(name, "bq_mx_lanes")) {
    const int64_t cpair = 2 * (e2 ? 8 / (int64_t)T : 16 / (int64_t)T);
    const int pairs_ok = d->op == BQ_QUANTIZE && d->direction == BQ_FORWARD && !d->rotation && k.lshift >= 1 &&
                         k.y % (uint64_t)cpair == 0 && (e2 ? k.ys / 2 : k.ys) % cpair == 0;
    if (k.lshift < 0 || k.lshift > 5 || k.ppr * (int64_t)(16 / T) != k.cols || (k.ngroups << k.lshift) != k.ppr ||
        k.lacc < 0 || k.lacc > 1 || (k.lacc && !pairs_ok) || k.items != (k.rows * k.ppr >> k.lacc) ||
        (k.fast && (k.rows * k.ppr >= ((int64_t)1 << 31) || k.fd.d != (uint32_t)k.ppr)))
      return violation("%s: %s: %lld pieces a row (2^%d a group, 2^%d a lane) of %lld, %lld items, fast %d",
                       call.plan->name, name, (long long)k.ppr, k.lshift, k.lacc, (long long)k.cols,
                       (long long)k.items, k.fast);
    wrows = dyn && d->scale_layout == BQ_SCALES_BLOCKED ? u(k.prows) : u(k.rows);
  }
  const uint64_t ng = u(k.ngroups);
  uint64_t n = 0;
  if (wrows && ng) {
    if (d->scale_layout == BQ_SCALES_BLOCKED) n = cdiv(wrows, 128) * 128 * cdiv(ng, 4) * 4;
    else if (d->scale_layout == BQ_SCALES_MN_MAJOR) n = sat_add(sat_mul(ng - 1, u(k.grs)), wrows);
    else n = sat_add(sat_mul(wrows - 1, u(k.grs)), ng);
  }
  touch(name, dyn ? "out_scales" : "scales", k.scales, n, dyn);
  if (d->scale_type == BQ_E4M3) touch(name, k.tensor_scale == k.out_tensor_scale && k.out_tensor_scale ? "out_tensor_scale"
                                            : "tensor_scale", k.tensor_scale, 4, 0);
}

/* launches checked, by kernel (the self-test lists them) */
static struct { char name[48]; unsigned long long launches; } kernels[64];

static int starts(const char *s, const char *prefix) { return !strncmp(s, prefix, strlen(prefix)); }

static void on_launch(const char *name, const unsigned dims[7], void **params, void *user) {
  (void)user;
  const bq_plan *p = call.plan;
  if (!p) die("a launch while no accepted call runs", name);
  if (!params || !params[0]) die("a launch without its parameter block", name);
  call.launches++;
  for (int i = 0; i < (int)NELEM(kernels); i++)
    if (!kernels[i].name[0] || !strcmp(kernels[i].name, name)) {
      snprintf(kernels[i].name, sizeof kernels[i].name, "%s", name);
      kernels[i].launches++;
      break;
    }
  const bq_desc *d = &p->desc;
  /* a fused producer's held op (stochastic rounding, the rotation) reads the producer's
     values: args.out, or the workspace */
  const int fused = bq__op_in(d->op, "fused");
  const bq_plan *h1 = p->sub, *h2 = h1 ? h1->sub : NULL; /* the plan held, and the one it holds */
  const char *vals = fused ? (call_has("out") ? "out" : "workspace") : NULL;
  if (starts(name, "bq_dynamic")) {
    const int sub = d->op == BQ_QUANTIZED_LINEAR || d->op == BQ_FP8_QUANTIZED_LINEAR; /* its activations' kernel,
                                                                                        into the workspace */
    const int held = fused && h1 && h1->desc.op == BQ_DYNAMIC_QUANTIZE;
    if (d->op != BQ_DYNAMIC_QUANTIZE && !sub && !held) die("a dynamic kernel launched by another plan", p->name);
    g_held = held, g_held_x = held ? vals : NULL;
    check_dynamic(name, sub || held ? &h1->desc : d, params[0], sub);
    g_held = 0, g_held_x = NULL;
  } else if (starts(name, "bq_affine")) {
    /* the affine plan held by dynamic quantize (stochastic rounding) or a fused producer, or
       by the dynamic quantize a fused producer holds */
    const bq_plan *q = h1 && h1->desc.op == BQ_QUANTIZE ? h1 : h2 && h2->desc.op == BQ_QUANTIZE ? h2 : NULL;
    const int held = (d->op == BQ_DYNAMIC_QUANTIZE || fused) && q;
    if (d->op != BQ_QUANTIZE && d->op != BQ_DEQUANTIZE && d->op != BQ_FAKE_QUANTIZE && !held)
      die("an affine kernel launched by another plan", p->name);
    g_held = held;
    g_held_x = held ? vals : NULL;
    check_affine(name, held ? &q->desc : d, params[0]);
    g_held = 0, g_held_x = NULL;
  } else if (starts(name, "bq_mx") && fused) { /* microscaling dynamic quantize held by a fused producer */
    if (!h1 || !bq__is_mx(&h1->desc)) die("a microscaling kernel launched by another plan", p->name);
    g_held = 1, g_held_x = vals;
    check_mx(name, &h1->desc, params[0]);
    g_held = 0, g_held_x = NULL;
  } else if (starts(name, "bq_fused")) {
    if (!bq__op_in(d->op, "fused")) die("a fused kernel launched by another plan", p->name);
    check_fused(name, d, params[0], dims[0]);
  } else if (starts(name, "bq_gem") || starts(name, "bq_fp8") || !strcmp(name, "bq_weight_sums")) {
    if (!bq__op_in(d->op, "linear") || (d->op == BQ_LINEAR_WEIGHT_SUMS) != !strcmp(name, "bq_weight_sums"))
      die("a linear kernel launched by another plan", p->name);
    check_linear(name, d, params[0]);
  } else if (starts(name, "bq_rotate")) {
    if (d->op != BQ_HADAMARD) die("a rotation kernel launched by another plan", p->name);
    check_rotate(name, d, params[0]);
  } else if (starts(name, "bq_mx")) {
    if (!bq__is_mx(d)) die("a microscaling kernel launched by another plan", p->name);
    check_mx(name, d, params[0]);
  } else {
    die("a kernel the fuzzer cannot decode (give it a check in on_launch)", name);
  }
}

/* ---- valid calls ---------------------------------------------------------------------------- */
#define VARIANTS 8
/* bq__typical_args' pointers, with a small problem of the plan's kind: variant picks rows,
   cols, groups, strides, alignment and which optional buffers are passed */
static void valid_args(const bq_plan *p, int variant, bq_args *a) {
  static const struct { int64_t rows, cols, group, n; int pad, skew; } V[VARIANTS] = {
    {3, 256, 128, 5, 0, 0}, {20, 96, 32, 17, 3, 1}, {64, 512, 16, 64, 0, 0}, {1, 4100, 1025, 300, 0, 1},
    {300, 64, 8, 300, 5, 0}, {2, 8200, 40, 8, 0, 0}, {2200, 2048, 64, 20, 0, 0}, {2200, 6000, 40, 100, 0, 0}};
  static const struct { int rank, axis; int64_t shape[4]; } CH[VARIANTS] = {
    {3, 2, {2, 3, 64}}, {2, 0, {5, 7}}, {2, -1, {4, 256}}, {4, 1, {3, 5, 7, 2}}, {1, 0, {1000}}, {2, 1, {2, 4096}},
    {3, -2, {2, 2200, 3}}, {2, 1, {7, 6000}}};
  const bq_desc *d = &p->desc;
  const int v = variant % VARIANTS, odd = v & 1;
  const int64_t T = bq__dtype_size(d->float_type);
  bq__typical_args(p, a);
  a->rows = V[v].rows;
  a->cols = V[v].cols;
  a->n = V[v].n;
  a->numel = V[v].rows * V[v].cols;
  a->rank = CH[v].rank;
  a->axis = CH[v].axis;
  memset(a->shape, 0, sizeof a->shape);
  memcpy(a->shape, CH[v].shape, sizeof CH[v].shape);
  a->group_size = d->granularity == BQ_PER_BLOCK ? (v == 3 ? 1000 : v == 4 ? 7 : 16) : V[v].group;
  if (d->op == BQ_HADAMARD) { /* blocks: a power of two dividing the row; the signs' seed */
    static const int64_t rb[VARIANTS] = {128, 32, 16, 4, 8, 8, 256, 16};
    a->group_size = rb[v];
    a->seed = d->random_signs ? 0x9E3779B97F4A7C15ull * (uint64_t)(v + 1) : 0;
  }
  if (d->rounding == BQ_ROUND_STOCHASTIC) /* stochastic rounding's key and a start off the sets of 8 */
    a->seed = 0xD1B54A32D192ED03ull * (uint64_t)(v + 1), a->offset = (uint64_t)v * 1000003u + (odd ? ~0ull - 40 : 0);
  if (V[v].skew) a->x = (const char *)a->x + T; /* aligned to an element, not to 16 bytes */
  if (V[v].pad) {
    const int64_t in_cols = d->op == BQ_GATED_QUANTIZE ? 2 * a->cols : a->cols;
    const int lin = bq__op_in(d->op, "linear");
    a->x_row_stride = in_cols + V[v].pad;
    a->y_row_stride = (lin ? a->n : a->cols) + 2 * V[v].pad;
    a->residual_row_stride = a->cols + 1;
    a->out_row_stride = a->cols + 4;
    if (d->granularity == BQ_PER_GROUP || d->granularity == BQ_PER_BLOCK) {
      const int block = d->granularity == BQ_PER_BLOCK;
      const int64_t ng = block ? (a->cols + a->group_size - 1) / a->group_size : a->cols / a->group_size;
      const int64_t sr = block ? (a->rows + a->group_size - 1) / a->group_size : a->rows;
      const int64_t inner = d->scale_type == BQ_UE8M0X4 ? (ng + 3) / 4 : ng;
      a->group_row_stride = (d->scale_layout == BQ_SCALES_MN_MAJOR ? sr : inner) + V[v].pad;
    }
  }
  if (d->op == BQ_FP8_LINEAR && d->granularity == BQ_PER_BLOCK) { /* 128 x 128 blocks; the activation scales' stride */
    a->group_size = odd ? 128 : 0;
    a->group_row_stride =
        V[v].pad ? (d->scale_layout == BQ_SCALES_MN_MAJOR ? a->rows : (a->cols + 127) / 128) + V[v].pad : 0;
  }
  if (d->op == BQ_FP8_QUANTIZED_LINEAR) { /* the activations' scales are its own; blockwise K in groups of 128 */
    a->group_row_stride = 0;
    a->group_size = d->granularity == BQ_PER_BLOCK && odd ? 128 : 0;
    if (d->granularity == BQ_PER_BLOCK) a->cols = a->cols >= 128 ? a->cols / 128 * 128 : 128;
    if (a->x_row_stride && a->x_row_stride < a->cols) a->x_row_stride = a->cols + V[v].pad;
  }
  const int fp8 = bq__is_fp8(d->int_type), x4 = d->scale_type == BQ_UE8M0X4;
  const uint64_t extra = region(20);
  /* optional buffers */
  if (d->op <= BQ_FAKE_QUANTIZE && d->granularity != BQ_PER_TENSOR && !fp8 && !x4 && !bq__is_mx(d) && odd)
    a->zero_points = (const int32_t *)(uintptr_t)region(21);
  if (d->op == BQ_FAKE_QUANTIZE && (d->granularity == BQ_PER_TENSOR || d->granularity == BQ_PER_CHANNEL) &&
      d->rounding == BQ_ROUND_NEAREST_EVEN && !d->rotation && (v == 2 || v == 3))
    a->mask = (void *)(uintptr_t)region(22);
  if (d->op == BQ_RMSNORM_QUANTIZE && (v == 1 || v == 2 || v == 5)) a->residual = (void *)(uintptr_t)extra;
  if (d->op == BQ_RMSNORM_QUANTIZE && v == 3) a->residual = (void *)(uintptr_t)a->x, a->residual_row_stride = 0;
  if (bq__op_in(d->op, "fused") && (v == 2 || v == 5)) a->out = (void *)(uintptr_t)region(23);
  if (bq__op_in(d->op, "linear") && (v == 0 || v == 2)) a->bias = (const void *)(uintptr_t)region(24);
  if (d->op == BQ_SMOOTHQUANT_LINEAR && d->asymmetric) a->zero_points = (const int32_t *)(uintptr_t)region(21);
  if (d->op == BQ_SMOOTHQUANT_LINEAR && d->asymmetric && d->granularity == BQ_PER_TENSOR) a->zero_point = 3;
  if (d->op == BQ_DYNAMIC_QUANTIZE && !d->asymmetric && odd) a->amax_bound = 3.0;
  if (bq__is_mx(d) || bq__fused_mx(d)) { /* E2M1: even groups and strides; blocked: its own extent; NVFP4: the tensor scale */
    if (a->group_size % 2) a->group_size = 20;
    if (a->x_row_stride % 2) a->x_row_stride++;
    if (a->y_row_stride % 2) a->y_row_stride++;
    if (d->scale_layout == BQ_SCALES_BLOCKED) a->group_row_stride = 0;
    if (d->scale_type == BQ_E4M3) {
      a->amax_bound = 0;
      if (d->op == BQ_DYNAMIC_QUANTIZE && odd) a->tensor_scale = (const void *)(uintptr_t)region(25), a->out_tensor_scale = NULL;
      if (bq__op_in(d->op, "fused") && odd) a->tensor_scale = NULL, a->out_tensor_scale = (void *)(uintptr_t)region(25); /* computed */
    }
  }
  if (d->rotation) { /* the fused rotation takes bq_mx_lanes' grid: rows of whole 16-byte pieces, groups of 32
                        (and the affine family's rows, per tensor and per channel the flat array, whole blocks) */
    a->rotation_block = v & 2 ? 64 : 16;
    a->group_size = 32;
    a->cols = (a->cols + 63) / 64 * 64;
    a->numel = a->rows * a->cols;
    if (a->rank > 0) a->shape[a->rank - 1] = (a->shape[a->rank - 1] + 63) / 64 * 64;
    a->x = (const void *)((uintptr_t)a->x & ~(uintptr_t)15);
    if (a->x_row_stride) a->x_row_stride = (d->op == BQ_GATED_QUANTIZE ? 2 * a->cols : a->cols) + 64;
    if (a->y_row_stride) a->y_row_stride = a->cols + 128;
    if (a->residual_row_stride) a->residual_row_stride = a->cols + 1;
    if (a->out_row_stride) a->out_row_stride = a->cols + 64; /* (the held op's rows: on the 16-byte grid) */
    if (a->group_row_stride && d->scale_layout == BQ_SCALES_ROW_MAJOR) a->group_row_stride = a->cols / 32 + 1;
  }
}

/* ---- the rules ----------------------------------------------------------------------------- */
static void check_rejection(bq_status st, const char *where) {
  char buf[1200];
  const char *m = bq_last_error();
  snprintf(buf, sizeof buf, "%s -> %s: \"%s\"", where, bq_status_name(st), m);
  if (st != BQ_ERROR_INVALID_ARGUMENT && st != BQ_ERROR_NOT_SUPPORTED && st != BQ_ERROR_INSUFFICIENT_WORKSPACE)
    die("a rejection with an unexpected status", buf);
  if (strstr(m, "desc.") || strstr(m, "args.") || strstr(m, "workspace (")) return;
  static const char *const NULLS[] = {"bq_plan_select: desc is NULL", "bq_plan_select: plan is NULL",
                                      ": args is NULL", "bq_plan_can_implement: plan is NULL",
                                      "bq_plan_run: plan is NULL", "bq_plan_workspace_size: plan is NULL"};
  for (size_t i = 0; i < NELEM(NULLS); i++)
    if (strstr(m, NULLS[i])) return;
  die("a rejection that names no field", buf);
}

static const uint64_t WS_BASE = (uint64_t)1 << 39;

/* can_implement, workspace_size and run on one plan and one call; returns the launches */
static unsigned long long exercise(const bq_plan *p, const bq_args *a, uint8_t ws_mode, uint8_t stream_mode) {
  char ctx[160];
  snprintf(ctx, sizeof ctx, "plan %s", p ? p->name : "NULL");
  bq_status ok = bq_plan_can_implement(p, a);
  char msg[sizeof bq__err_buf];
  snprintf(msg, sizeof msg, "%s", bq_last_error());
  if (ok) check_rejection(ok, ctx);
  size_t need = 0;
  bq_status wst = bq_plan_workspace_size(p, a, &need);
  if (wst) check_rejection(wst, "workspace size");
  /* the workspace needs only the shape: a call whose shape it refuses is refused whole */
  if (wst && !ok) die("workspace_size refused what can_implement accepted", ctx);
  void *ws = NULL;
  size_t ws_bytes = 0;
  switch (ws_mode % 5) {
  case 0: break;
  case 1: ws = (void *)(uintptr_t)WS_BASE; ws_bytes = need; break;
  case 2: ws = (void *)(uintptr_t)WS_BASE; ws_bytes = need ? need - 1 : 0; break;
  case 3: ws = (void *)(uintptr_t)(WS_BASE + 4); ws_bytes = need; break;
  default: ws = (void *)(uintptr_t)WS_BASE; ws_bytes = SIZE_MAX; break;
  }
  void *stream = stream_mode ? (void *)(uintptr_t)0xd00000000ull : NULL;
  const unsigned long long before = call.launches;
  if (!ok && p && a) {
    document(p, a, ws, need);
    call.plan = p;
  }
  bq_status st = bq_plan_run(p, a, ws, ws_bytes, stream);
  call.plan = NULL;
  char buf[2600];
  if (!p) {
    if (!st) die("bq_plan_run accepted a NULL plan", ctx);
    check_rejection(st, ctx);
    return 0;
  }
  if (ok) {
    snprintf(buf, sizeof buf, "%s: can_implement %s \"%s\", run %s \"%s\"", ctx, bq_status_name(ok), msg,
             bq_status_name(st), bq_last_error());
    if (st != ok || strcmp(bq_last_error(), msg)) die("run and can_implement disagree", buf);
    return 0;
  }
  if (st) {
    check_rejection(st, ctx);
    int ws_fail = st == BQ_ERROR_INSUFFICIENT_WORKSPACE || strstr(bq_last_error(), "workspace (");
    snprintf(buf, sizeof buf, "%s: can_implement accepted, run %s \"%s\"", ctx, bq_status_name(st), bq_last_error());
    if (!ws_fail) die("run rejected what can_implement accepted", buf);
  }
  return call.launches - before;
}

/* select through the public API, every rule of a descriptor checked; NULL where refused.
   env: 1 BARACUDA_QUANT_LAZY=0, 2 BARACUDA_QUANT_WGMMA=0, 4 BARACUDA_QUANT_FORCE_PTX=1 */
static void set_env(int env) {
  if (env & 1) setenv("BARACUDA_QUANT_LAZY", "0", 1);
  else unsetenv("BARACUDA_QUANT_LAZY");
  if (env & 2) setenv("BARACUDA_QUANT_WGMMA", "0", 1);
  else unsetenv("BARACUDA_QUANT_WGMMA");
  if (env & 4) setenv("BARACUDA_QUANT_FORCE_PTX", "1", 1);
  else unsetenv("BARACUDA_QUANT_FORCE_PTX");
}
static bq_plan *select_checked(const bq_desc *dp, int env, int sm) {
  set_env(env);
  char sku[512];
  if (sm != 90) { /* another arch's SKU (PTX where NVRTC lacks it; refused where too old or no arch) */
    bq_status s = bq_sku(dp, sm, sku, sizeof sku);
    if (s && !strstr(bq_last_error(), "sm (")) check_rejection(s, "bq_sku"); /* (or it names the sm) */
  }
  bq_status s1 = bq_sku(dp, 90, sku, sizeof sku);
  if (s1) check_rejection(s1, "bq_sku");
  bq_desc norm;
  char name[96];
  bq_status sn = bq__normalize(dp, &norm, name, sizeof name);
  if ((sn != BQ_SUCCESS) != (s1 != BQ_SUCCESS)) die("bq_sku and validation disagree", bq_last_error());
  bq_plan *p = NULL;
  bq_status s2 = bq_plan_select(dp, &p);
  set_env(0);
  /* BQ_DEVICE(n) past the fake driver's one device is valid, and absent when selected */
  int absent = !sn && norm.device > BQ_DEVICE(0) && s2 == BQ_ERROR_NO_DEVICE && strstr(bq_last_error(), "does not exist");
  char buf[1400];
  if (!absent && ((s2 != BQ_SUCCESS) != (sn != BQ_SUCCESS) || (sn && s2 != sn))) {
    snprintf(buf, sizeof buf, "validation %s, bq_plan_select %s: %s", bq_status_name(sn), bq_status_name(s2),
             bq_last_error());
    die("bq_plan_select and validation disagree", buf);
  }
  if (s2 && !absent) check_rejection(s2, "bq_plan_select");
  if (!p) return NULL;
  if (memcmp(&p->desc, &norm, sizeof norm)) die("a plan whose desc is not the normalized one", p->name);
  if (!*bq_plan_precision_guarantee(p) || strncmp(bq_plan_sku(p), sku, strlen(sku)))
    die("a plan without a guarantee, or whose SKU is not bq_sku's", bq_plan_sku(p));
  if (!bq__op_in(norm.op, "linear")) {
    bq_desc back;
    bq__target t;
    /* a plan that holds another (dynamic quantize's stochastic rounding, a fused producer's
       second op, which may hold one too) names them in turn, "A + B + C": each part parses
       back to its plan's desc */
    for (const bq_plan *q = p; q; q = q->sub) {
      char own[sizeof p->sku];
      snprintf(own, sizeof own, "%s", q->sku);
      char *plus = strstr(own, " + ");
      if (plus) *plus = 0;
      if (!plus != !q->sub || (plus && strcmp(plus + 3, q->sub->sku)))
        die("a plan SKU's held part that is not its held plan's", p->sku);
      if (bq__desc_from_sku(own, &back, &t)) die("a plan SKU (or its held part) that does not parse back", p->sku);
      back.device = q->desc.device;
      if (q->desc.rotation) back.random_signs = q->desc.random_signs; /* (the rotation's signs: a run-time choice) */
      if (memcmp(&back, &q->desc, sizeof back)) die("a plan SKU (or its held part) that parses back to another desc", p->sku);
    }
    if (memcmp(&p->desc, &norm, sizeof norm)) die("a plan whose desc is not the normalized one", p->sku);
  }
  return p;
}

static void set_desc_member(bq_desc *d, int m, int32_t v) { memcpy((char *)d + (size_t)m * sizeof(int), &v, sizeof v); }
static int32_t desc_member(const bq_desc *d, int m) {
  int32_t v;
  memcpy(&v, (const char *)d + (size_t)m * sizeof(int), sizeof v);
  return v;
}

static void edit_args(reader *r, bq_args *a) {
  while (r->n) {
    const int slot = u8(r) % ARGS_SLOTS, how = u8(r) % 6;
    char *at = (char *)a + (size_t)slot * 8;
    int64_t old, v;
    memcpy(&old, at, 8);
    switch (how) {
    case 0: v = size_value(r); break;
    case 1: v = (int64_t)ptr_value(r); break;
    case 2: { double dv = double_value(r); memcpy(&v, &dv, 8); break; }
    case 3: v = (int64_t)(uint32_t)i32(r); break;
    case 4: v = u8(r); break;
    default: v = (int64_t)((uint64_t)old + (uint64_t)(int64_t)(int8_t)u8(r)); break;
    }
    memcpy(at, &v, 8);
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  setup();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  setup();
  reader r = {data, size};
  const uint8_t kind = u8(&r) % 4;
  bq_desc d, base;
  memset(&d, 0, sizeof d);
  int index = 0;
  if (kind == 0) {
    index = u16(&r) % ndescs;
    d = descs[index];
    const uint8_t edits = u8(&r) % 8;
    for (uint8_t i = 0; i < edits; i++) {
      const int m = u8(&r) % DESC_MEMBERS, how = u8(&r) % 4;
      int32_t v;
      switch (how) {
      case 0: v = i32(&r); break;
      case 1: v = desc_member(&descs[u16(&r) % ndescs], m); break;
      case 2: v = (int8_t)u8(&r); break;
      default: v = (int32_t)((uint32_t)desc_member(&d, m) + (uint32_t)(int8_t)u8(&r)); break;
      }
      set_desc_member(&d, m, v);
    }
  } else if (kind == 1) {
    for (int m = 0; m < DESC_MEMBERS; m++) set_desc_member(&d, m, i32(&r));
    index = (int)(size % (size_t)ndescs);
  }
  const uint8_t flags = u8(&r), variant = u8(&r), ws_mode = u8(&r), stream_mode = u8(&r);
  bq_plan *plan = NULL;
  if (kind != 3) {
    static const int SMS[8] = {90, 80, 86, 89, 100, 87, 75, 5};
    plan = select_checked(kind == 2 ? NULL : &d, flags >> 2 & 7, SMS[flags >> 5]);
    if (!plan) { /* the arguments still go through a plan: the enumerated desc's */
      base = descs[index];
      plan = select_checked(&base, 0, 90);
      if (!plan) die("an enumerated desc that does not select", bq_last_error());
    }
  }
  bq_args a;
  memset(&a, 0, sizeof a);
  if (plan && (flags & 1)) valid_args(plan, variant, &a);
  edit_args(&r, &a);
  if (kind == 3 || plan) exercise(plan, (flags & 2) ? NULL : &a, ws_mode, stream_mode);
  bq_plan_destroy(plan);
  return 0;
}

#ifndef BQ_LIBFUZZER
static void print_kernels(const char *who) {
  printf("%s: launches checked by kernel:", who);
  for (int i = 0; i < (int)NELEM(kernels) && kernels[i].name[0]; i++)
    printf("%s %s %llu", i ? "," : "", kernels[i].name, kernels[i].launches);
  printf("\n");
}

/* Every enumerated desc with each valid call: accepted, launched, inside the documented
   buffers; then each buffer a launch touched, registered one element short, must be
   reported. Prints counts; exits 1 where a check could not fail or a valid call failed. */
static int self_test(void) {
  unsigned long long calls = 0, shrinks = 0, missed = 0, failed = 0, slack = 0;
  call.record = 1;
  for (int i = 0; i < ndescs; i++)
  for (int env = 0; env < (bq__op_in(descs[i].op, "linear") ? 3 : 1); env++) { /* linear: WGMMA=0, FORCE_PTX=1 too */
    bq_plan *p = select_checked(&descs[i], env ? 1 << env : 0, 90);
    if (!p) die("an enumerated desc that does not select", bq_last_error());
    for (int v = 0; v < VARIANTS; v++) {
      bq_args a;
      valid_args(p, v, &a);
      size_t need = 0;
      if (bq_plan_can_implement(p, &a) || bq_plan_workspace_size(p, &a, &need)) {
        fprintf(stderr, "self-test: %s variant %d refused: %s\n", p->name, v, bq_last_error());
        failed++;
        continue;
      }
      call.shrink = -1;
      call.violations = 0;
      unsigned long long n = exercise(p, &a, 1, 0);
      calls++;
      if (!n || call.violations) {
        fprintf(stderr, "self-test: %s (%s) variant %d: %llu launches, %d violations: %s\n", p->name, p->sku, v, n,
                call.violations, call.first);
        failed++;
        continue;
      }
      buffer full[NELEM(call.buf)];
      const int nbuf = call.nbuf;
      memcpy(full, call.buf, sizeof full);
      for (int b = 0; b < nbuf; b++) {
        if (!full[b].touched) continue;
        /* the workspace is what bq_plan_workspace_size asks, which a small call may not use
           whole; every other buffer is used to its documented end */
        if (full[b].reach < full[b].bytes) {
          if (!strcmp(full[b].role, "workspace")) continue;
          fprintf(stderr, "self-test: %s (%s) variant %d: %s documented %llu bytes, launches told to touch %llu\n",
                  p->name, p->sku, v, full[b].role, (unsigned long long)full[b].bytes,
                  (unsigned long long)full[b].reach);
          slack++;
        }
        call.shrink = b;
        call.violations = 0;
        exercise(p, &a, 1, 0);
        shrinks++;
        if (!call.violations) {
          fprintf(stderr, "self-test: %s (%s) variant %d: %s one element short (%llu bytes) went unreported\n",
                  p->name, p->sku, v, full[b].role, (unsigned long long)(full[b].bytes - full[b].elem));
          missed++;
        }
      }
      call.shrink = -1;
    }
    bq_plan_destroy(p);
  }
  call.record = 0;
  print_kernels("fuzz_api --self-test");
  printf("fuzz_api --self-test: %d descs, %llu valid calls, %llu launches, %llu buffers one element short: %llu "
         "unreported; %llu buffers not used to their documented end, %llu calls failed\n", ndescs, calls,
         call.launches, shrinks, missed, slack, failed);
  return missed || failed || slack || !shrinks;
}

/* Replays every file given, and every file of every directory given; prints a count. */
static size_t replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) die("cannot open", path);
  uint8_t *buf = NULL;
  size_t n = 0, cap = 0;
  int c;
  while ((c = fgetc(f)) != EOF) {
    if (n == cap) {
      cap = cap ? 2 * cap : 256;
      buf = realloc(buf, cap);
      if (!buf) die("out of memory", path);
    }
    buf[n++] = (uint8_t)c;
  }
  fclose(f);
  LLVMFuzzerTestOneInput(buf, n);
  free(buf);
  return 1;
}
int main(int argc, char **argv) {
  LLVMFuzzerInitialize(&argc, &argv);
  if (argc == 2 && !strcmp(argv[1], "--self-test")) return self_test();
  size_t runs = 0;
  int dirs = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st)) die("cannot stat", argv[i]);
    dirs += S_ISDIR(st.st_mode) != 0;
    if (!S_ISDIR(st.st_mode)) {
      runs += replay_file(argv[i]);
      continue;
    }
    DIR *dir = opendir(argv[i]);
    if (!dir) die("cannot open", argv[i]);
    struct dirent *e;
    while ((e = readdir(dir))) {
      if (e->d_name[0] == '.') continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
      if (!stat(path, &st) && S_ISREG(st.st_mode)) runs += replay_file(path);
    }
    closedir(dir);
  }
  /* a corpus (a directory) that never launches would test none of the launch checks */
  unsigned long long launches = launch_count();
  print_kernels("fuzz_api");
  printf("fuzz_api: %zu inputs replayed, %llu launches (%llu checked), every rule held\n", runs, launches,
         call.launches);
  if (dirs && runs && !launches) die("no input of the corpus launched a kernel", "it misses every accepted call");
  free(descs);
  return 0;
}
#endif
