#!/usr/bin/env python3
"""tools/dev/affine_sweep.py - an experiment copy of baracuda_quant.h whose affine launch
choices can be changed per process, for sweeping them on a GPU host in one call.

    python3 tools/dev/affine_sweep.py OUT_DIR

writes OUT_DIR/baracuda_quant.h (this checkout's sources with the hooks below, assembled by
tools/amalgamate.py in a scratch copy) and OUT_DIR/tools/{bench.c,baracuda-quant.c}, so that
`cc ... -I OUT_DIR OUT_DIR/tools/bench.c` builds a benchmark of the experiment header.
tools/dev/affine_sweep.sh builds and runs it. The hooks:

- Host, read on every plan's use of its affine table row: BQX_<column>=N replaces that
  column of every row (u, ga, fr, na, waves, odd, slots, items, bcap, cwave, lean, lu; lu
  reaches the kernel through the prelude), BQX_R<e>=N entry point e's register budget (0 row,
  1 cols, 2 odd, 3 blocks, 4 flat, 5 narrow, 6 mask). BQX_CP (set) gives bq_affine_cols a
  full 16-byte access of every type.
- Kernels, through BARACUDA_QUANT_NVRTC_OPTIONS=-DBQ_XP=CP (digits; one option only):
  P, bq_affine_lean's and bq_affine_pair's 8- and 16-byte loads: 0 as the library does
  (plain ld.global), 1 with an L2 evict-last policy, 2 ld.global.cs, 3 ld.global.nc with
  L1::no_allocate, 4 the same with L2::256B; C, 8 (as the tens digit: 8P) for bq_affine_cols'
  16-byte accesses of 16-bit data (with BQX_CP=1).
The cache key holds the source and the options, so every setting compiles its own kernels
and one cache directory serves them all. The header is for measuring only: nothing checks
the overridden settings against the kernels' rules (a column that names a kernel a row
lacks fails at run time), and it is never committed.
"""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def patch(text, old, new, what):
    if text.count(old) != 1:
        sys.exit("affine_sweep: the anchor for %s is not in the sources once (found %d times); "
                 "update tools/dev/affine_sweep.py" % (what, text.count(old)))
    return text.replace(old, new)


HOST_ROW_OLD = """  int i = ((((int)d->op - BQ_QUANTIZE) * 2 + (d->direction == BQ_BACKWARD)) * 4 + g) * 4 + t;
  return &bq__affine_table[i];
}"""
HOST_ROW_NEW = """  int i = ((((int)d->op - BQ_QUANTIZE) * 2 + (d->direction == BQ_BACKWARD)) * 4 + g) * 4 + t;
  static __thread bq__affine_row xr; /* affine_sweep: the row with the BQX_ overrides */
  xr = bq__affine_table[i];
  const char *e;
#define BQX_F(f)                        \\
  if ((e = getenv("BQX_" #f))) xr.f = atoi(e);
  BQX_F(u) BQX_F(ga) BQX_F(fr) BQX_F(na) BQX_F(waves) BQX_F(odd) BQX_F(slots) BQX_F(items) BQX_F(bcap)
  BQX_F(cwave) BQX_F(lean) BQX_F(lu)
#undef BQX_F
  for (int r = 0; r < 7; r++) {
    char nm[16];
    snprintf(nm, sizeof nm, "BQX_R%d", r);
    if ((e = getenv(nm))) xr.regs[r] = atoi(e);
  }
  return &xr;
}"""
HOST_CP_OLD = "  int64_t cp = p->vec < 4 ? p->vec : 4;\n"
HOST_CP_NEW = "  int64_t cp = p->vec < 4 ? p->vec : 4;\n  if (getenv(\"BQX_CP\")) cp = p->vec; /* affine_sweep */\n"
KERN_CP_OLD = "#define BQ_CP (BQ_P < 4 ? BQ_P : 4) // columns per lane: 16-byte f32/f64, 8-byte f16/bf16 accesses"
KERN_CP_NEW = """#if defined(BQ_XP) && BQ_XP >= 80 // affine_sweep: 16-byte accesses of every type
#define BQ_CP BQ_P
#else
#define BQ_CP (BQ_P < 4 ? BQ_P : 4) // columns per lane: 16-byte f32/f64, 8-byte f16/bf16 accesses
#endif"""
KERN_LOAD_OLD = """template <typename C> static __device__ __forceinline__ void bq_lean_load(C &x, const void *src) {
#if !defined(BQ_EMULATED)
  if (sizeof(C) == 16 || sizeof(C) == 8) {"""
KERN_LOAD_NEW = """#ifdef BQ_XP // affine_sweep: the load policy
#define BQ_LEAN_POLICY (BQ_XP % 10)
#else
#define BQ_LEAN_POLICY 0
#endif
template <typename C> static __device__ __forceinline__ void bq_lean_load(C &x, const void *src) {
#if !defined(BQ_EMULATED)
  if (BQ_LEAN_POLICY != 0 && (sizeof(C) == 16 || sizeof(C) == 8)) {
    bq_u32 *v = (bq_u32 *)&x;
    bq_u64 pol;
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
#define BQX_LD(Q, H4, H2)                                                                                               \
  if (sizeof(C) == 16)                                                                                              \
    asm volatile("ld.global" Q ".v4.u32 {%0, %1, %2, %3}, [%4]" H4 ";"                                               \
                 : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "l"(src), "l"(pol));                            \
  else                                                                                                              \
    asm volatile("ld.global" Q ".v2.u32 {%0, %1}, [%2]" H2 ";" : "=r"(v[0]), "=r"(v[1]) : "l"(src), "l"(pol));
    if (BQ_LEAN_POLICY == 1) { BQX_LD(".L2::cache_hint", ", %5", ", %3") }
    if (BQ_LEAN_POLICY == 2) { BQX_LD(".cs", "", "") }
    if (BQ_LEAN_POLICY == 3) { BQX_LD(".nc.L1::no_allocate", "", "") }
    if (BQ_LEAN_POLICY == 4) { BQX_LD(".nc.L1::no_allocate.L2::256B", "", "") }
#undef BQX_LD
    return;
  }
  if (sizeof(C) == 16 || sizeof(C) == 8) {"""


def main():
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit(__doc__.split("\n\n")[1])
    out = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        for d in ("src", "kernels_src", "tools"):
            shutil.copytree(os.path.join(ROOT, d), os.path.join(tmp, d),
                            ignore=shutil.ignore_patterns("dev", "*.pyc", "__pycache__"))
        fam = os.path.join(tmp, "src", "family_affine.h")
        s = open(fam).read()
        s = patch(s, HOST_ROW_OLD, HOST_ROW_NEW, "the table row (bq__affine_row_of)")
        s = patch(s, HOST_CP_OLD, HOST_CP_NEW, "the columns kernel's width (bq__affine_cols_cp)")
        open(fam, "w").write(s)
        ker = os.path.join(tmp, "kernels_src", "affine.cu")
        s = open(ker).read()
        s = patch(s, KERN_CP_OLD, KERN_CP_NEW, "BQ_CP")
        s = patch(s, KERN_LOAD_OLD, KERN_LOAD_NEW, "bq_lean_load")
        open(ker, "w").write(s)
        subprocess.run([sys.executable, os.path.join(tmp, "tools", "amalgamate.py")], check=True,
                       stdout=subprocess.DEVNULL)
        os.makedirs(os.path.join(out, "tools"), exist_ok=True)
        shutil.copy(os.path.join(tmp, "baracuda_quant.h"), os.path.join(out, "baracuda_quant.h"))
        for f in ("bench.c", "baracuda-quant.c"):
            shutil.copy(os.path.join(ROOT, "tools", f), os.path.join(out, "tools", f))
    print("affine_sweep: wrote %s/baracuda_quant.h and tools/" % out)


if __name__ == "__main__":
    main()
