/* tests/emu_spec.c - the header an emulated suite is built with, for one specialization.
   tests/meson.build runs it for each entry of its lists:

     emu_spec OUTPUT.h op=quantize dir=bwd gran=per_channel float=bf16 int=u8 q=3,200 scale=f32
     emu_spec OUTPUT.h op=quantized_linear float=f32 int=u8 out=f16 scale=f32 asym=1 wgmma=1
     emu_spec OUTPUT.h op=gated_quantize act=gelu_tanh gran=per_group float=bf16 int=s8 q=-128,127
     emu_spec OUTPUT.h op=dynamic_quantize gran=per_token float=bf16 int=e4m3 scale=f32
     emu_spec OUTPUT.h op=dynamic_quantize gran=per_token float=f32 int=e5m2 scale=f32 pow2=1
     emu_spec OUTPUT.h op=quantize gran=per_group float=bf16 int=e4m3 scale=ue8m0x4 layout=mn

   (the words are the SKUs' names; a field left out keeps the descriptor's default; FP8
   storage, int=e4m3 or int=e5m2, takes no q= or q=0,0; scale=ue8m0 names UE8M0 scales,
   scale=ue8m0x4 packed ones, pow2=1 sets desc.pow2_scales, layout=mn desc.scale_layout
   BQ_SCALES_MN_MAJOR and layout=blocked BQ_SCALES_BLOCKED, rule=floor (ceil, even, rceil,
   rceil_sat; NVFP4's torchao, te) desc.scale_rule; int=e2m1 and scale=e4m3 name the microscaling
   types; round=sr sets desc.rounding BQ_ROUND_STOCHASTIC, rot=1 desc.rotation). It
   normalizes that descriptor and writes, from the header's own functions:
   - without EMU_SECTION: the names of the enums' values (BQ_TYPE_F32, ...), the test's
     EMU_* macros in those names, the host's dispatch numbers for it (EMU_U, EMU_GA, EMU_FR,
     EMU_NA, EMU_LEAN) and EMU_PRELUDE, the prelude text, for checks (EMU_PRELUDE_ACT, the activation kernel's);
   - with EMU_SECTION 1: the prelude bq__build_source writes for the plan's kernel;
     2: the linear weight sums' prelude; 3: QuantizedLinear's activation kernel's prelude.
   So a suite compiles exactly the specialization the host would, and nothing in it or in
   meson repeats the host's rules. */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#define BARACUDA_QUANT_TOOLS /* bq__all_descs, bq__desc_from_sku and their kin */
#include "../baracuda_quant.h"

static int fail(const char *what, const char *arg) {
  fprintf(stderr, "emu_spec: %s: %s\n", what, arg);
  return 2;
}

static int op_of(const char *s, bq_op *op) {
  for (int i = BQ_QUANTIZE; i <= BQ_FP8_LINEAR; i++)
    if (!strcmp(s, bq__op_name((bq_op)i))) { *op = (bq_op)i; return 1; }
  return 0;
}
static int gran_of(const char *s, bq_granularity *g) {
  for (int i = BQ_PER_TENSOR; i <= BQ_PER_BLOCK; i++)
    if (!strcmp(s, bq__gran_name((bq_granularity)i))) { *g = (bq_granularity)i; return 1; }
  return 0;
}

/* a type by its SKU name: the header's bq__dtype_from_name, which knows the types up to
   BQ_S32, then the FP8 storage types and the UE8M0 scale type by the names bq__dtype_name
   gives them */
static int dtype_of(const char *s, bq_dtype *t) {
  if (bq__dtype_from_name(s, t)) return 1;
  const bq_dtype fp8[] = {BQ_E4M3, BQ_E5M2, BQ_UE8M0};
  for (int i = 0; i < 3; i++)
    if (!strcmp(s, bq__dtype_name(fp8[i]))) { *t = fp8[i]; return 1; }
  return 0;
}

/* the prelude of d's kernel as bq__build_source writes it */
static void prelude(const bq_desc *d, const bq__target *t, bq__str *s) {
  bq__kernel_src k;
  memset(&k, 0, sizeof k);
  bq__sku_of(d, t, &k);
  bq__prelude(d, &k, s);
}
/* every entry point the family names for d's granularity, empty ones too (the suites call
   them by name): bq__build_source's BQ_E_ macros for a source that holds them all */
static void all_entries(const bq_desc *d, bq__str *s) {
  bq__entry_defines(bq__family_of(d)->kernels[bq__gran_code(d->granularity)], s);
}

/* a C string literal of s */
static void literal(FILE *f, const bq__str *s) {
  fputc('"', f);
  for (size_t i = 0; i < s->n; i++) {
    char c = s->p[i];
    if (c == '\n') fputs(i + 1 < s->n ? "\\n\" \\\n  \"" : "\\n", f);
    else if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

int main(int argc, char **argv) {
  if (argc < 3) return fail("usage", "emu_spec OUTPUT.h key=value...");
  bq_desc in;
  memset(&in, 0, sizeof in);
  int wgmma = 0;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *v = strchr(a, '=');
    if (!v) return fail("not key=value", a);
    v++;
    int ok = 1;
    if (!strncmp(a, "op=", 3)) ok = op_of(v, &in.op);
    else if (!strncmp(a, "dir=", 4)) in.direction = !strcmp(v, "bwd") ? BQ_BACKWARD : BQ_FORWARD, ok = !strcmp(v, "bwd") || !strcmp(v, "fwd");
    else if (!strncmp(a, "gran=", 5)) ok = gran_of(v, &in.granularity);
    else if (!strncmp(a, "float=", 6)) ok = dtype_of(v, &in.float_type);
    else if (!strncmp(a, "int=", 4)) ok = dtype_of(v, &in.int_type);
    else if (!strncmp(a, "out=", 4)) ok = dtype_of(v, &in.out_type);
    else if (!strncmp(a, "scale=", 6)) ok = dtype_of(v, &in.scale_type);
    else if (!strncmp(a, "q=", 2)) ok = sscanf(v, "%d,%d", &in.qmin, &in.qmax) == 2;
    else if (!strncmp(a, "asym=", 5)) in.asymmetric = atoi(v);
    else if (!strncmp(a, "pow2=", 5)) in.pow2_scales = atoi(v);
    else if (!strncmp(a, "layout=", 7))
      in.scale_layout = !strcmp(v, "blocked") ? BQ_SCALES_BLOCKED : BQ_SCALES_MN_MAJOR,
      ok = !strcmp(v, "mn") || !strcmp(v, "blocked");
    else if (!strncmp(a, "rule=", 5)) {
      ok = 0;
      for (int r = 0; r < BQ__MX_RULES; r++)
        if (!strcmp(v, bq__mx_rules[r])) in.scale_rule = (bq_scale_rule)r, ok = 1;
    }
    else if (!strncmp(a, "wgmma=", 6)) wgmma = atoi(v);
    else if (!strncmp(a, "signs=", 6)) in.random_signs = atoi(v);
    else if (!strncmp(a, "round=", 6)) in.rounding = BQ_ROUND_STOCHASTIC, ok = !strcmp(v, "sr");
    else if (!strncmp(a, "rot=", 4)) in.rotation = atoi(v);
    else if (!strncmp(a, "act=", 4))
      in.activation = !strcmp(v, "silu") ? BQ_SILU : !strcmp(v, "gelu_tanh") ? BQ_GELU_TANH : BQ_ACTIVATION_DEFAULT,
      ok = in.activation != BQ_ACTIVATION_DEFAULT;
    else ok = 0;
    if (!ok) return fail("unknown key or value", a);
  }
  bq_desc d;
  char name[96];
  if (bq__normalize(&in, &d, name, sizeof name)) return fail("descriptor refused", bq_last_error());
  const bq__target t = {90, 0, wgmma, 0};
  FILE *f = fopen(argv[1], "w");
  if (!f) return fail("cannot write", argv[1]);
  bq__str names, p1, p2, p3, e1, e2, e3;
  memset(&names, 0, sizeof names);
  memset(&p1, 0, sizeof p1);
  memset(&p2, 0, sizeof p2);
  memset(&p3, 0, sizeof p3);
  memset(&e1, 0, sizeof e1);
  memset(&e2, 0, sizeof e2);
  memset(&e3, 0, sizeof e3);
  bq__spec_names(&names);
  prelude(&d, &t, &p1);
  all_entries(&d, &e1);
  int lin = bq__op_in(d.op, "linear"), ql = d.op == BQ_QUANTIZED_LINEAR;
  if (lin) {
    bq_desc ws, n;
    memset(&ws, 0, sizeof ws);
    ws.op = BQ_LINEAR_WEIGHT_SUMS;
    bq__normalize(&ws, &n, name, sizeof name);
    const bq__target t0 = {90, 0, 0, 0};
    prelude(&n, &t0, &p2);
    all_entries(&n, &e2);
  }
  if (ql) {
    bq_desc q, n;
    bq__linear_activation_desc(&d, &q);
    if (bq__normalize(&q, &n, name, sizeof name)) return fail("activation descriptor refused", bq_last_error());
    const bq__target t0 = {90, 0, 0, 0};
    prelude(&n, &t0, &p3);
    all_entries(&n, &e3);
  }
  fprintf(f, "/* generated by tests/emu_spec.c:");
  for (int i = 2; i < argc; i++) fprintf(f, " %s", argv[i]);
  fprintf(f, " */\n#ifndef EMU_SECTION\n%.*s", (int)names.n, names.p);
  fprintf(f, "#define EMU_OP %s\n#define EMU_DIR %s\n#define EMU_BWD %d\n#define EMU_GRAN %s\n", bq__spec("OP", d.op),
          bq__spec("DIR", d.direction), d.direction == BQ_BACKWARD, bq__spec("GRAN", d.granularity));
  /* (packed UE8M0 scales have no kernel type name: the bq_dtype's value) */
  char st[32];
  snprintf(st, sizeof st, "%s", bq__spec("TYPE", d.scale_type));
  if (d.scale_type == BQ_UE8M0X4) snprintf(st, sizeof st, "(%d)", (int)BQ_UE8M0X4);
  fprintf(f, "#define EMU_T %s\n#define EMU_I %s\n#define EMU_QMIN (%d)\n#define EMU_QMAX (%d)\n#define EMU_ST %s\n",
          bq__spec("TYPE", d.float_type), bq__spec("TYPE", d.int_type), d.qmin, d.qmax, st);
  fprintf(f, "#define EMU_LAYOUT %d\n", (int)d.scale_layout); /* per group: 1 MN-major scales */
  fprintf(f, "#define EMU_ASYM %d\n#define EMU_OUT %s\n#define EMU_QL %d\n#define EMU_WGMMA %d\n", d.asymmetric,
          bq__spec("TYPE", lin ? d.out_type : d.float_type), ql, wgmma);
  fprintf(f, "#define EMU_ACT %d\n", (int)d.activation); /* the gated op's bq_activation (0 elsewhere) */
  fprintf(f, "#define EMU_POW2 %d\n", d.pow2_scales); /* dynamic: power-of-two scales (UE8M0 implies them) */
  fprintf(f, "#define EMU_RULE %d\n", (int)d.scale_rule); /* microscaling: the UE8M0 rule */
  fprintf(f, "#define EMU_SIGNS %d\n", d.random_signs); /* the rotation: random signs */
  fprintf(f, "#define EMU_SR %d\n", d.rounding == BQ_ROUND_STOCHASTIC); /* stochastic rounding */
  fprintf(f, "#define EMU_ROT %d\n", d.rotation); /* microscaling: the fused rotation */
  if (bq__family_of(&d) == &bq__affine_family)
    fprintf(f, "#define EMU_U %d\n#define EMU_GA %d\n#define EMU_FR %d\n#define EMU_NA %d\n#define EMU_LEAN %d\n",
            bq__affine_u(&d), bq__affine_ga(&d), bq__affine_fr(&d), bq__affine_na(&d), bq__affine_row_of(&d)->lean);
  fprintf(f, "#define EMU_PRELUDE ");
  literal(f, &p1);
  if (ql) {
    fprintf(f, "\n#define EMU_PRELUDE_ACT ");
    literal(f, &p3);
  }
  fprintf(f, "\n#elif EMU_SECTION == 1\n%.*s%.*s", (int)p1.n, p1.p, (int)e1.n, e1.p);
  if (lin) fprintf(f, "#elif EMU_SECTION == 2\n%.*s%.*s", (int)p2.n, p2.p, (int)e2.n, e2.p);
  if (ql) fprintf(f, "#elif EMU_SECTION == 3\n%.*s%.*s", (int)p3.n, p3.p, (int)e3.n, e3.p);
  fprintf(f, "#else\n#error \"no such section\"\n#endif\n");
  int bad = names.oom || p1.oom || p2.oom || p3.oom || e1.oom || e2.oom || e3.oom;
  BQ_FREE(e1.p);
  BQ_FREE(e2.p);
  BQ_FREE(e3.p);
  BQ_FREE(names.p);
  BQ_FREE(p1.p);
  BQ_FREE(p2.p);
  BQ_FREE(p3.p);
  if (fclose(f) || bad) return fail("write failed", argv[1]);
  return 0;
}
