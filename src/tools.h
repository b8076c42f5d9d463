/* ---- SKUs back to descriptors, and every kernel, for tools --------------------------- */
/* Compiled where the including file defines BARACUDA_QUANT_TOOLS as well: the CLI, the
   Python package's shim, the kernel dumper and the tests that walk every kernel. */
#ifdef BARACUDA_QUANT_TOOLS
BQ__FN int bq__dtype_from_name(const char *s, bq_dtype *t) {
  for (int i = BQ_F32; i <= BQ_UE8M0X4; i++)
    if (!strcmp(s, bq__dtype_name((bq_dtype)i))) { *t = (bq_dtype)i; return 1; }
  return 0;
}

/* The normalized desc and target a SKU (as bq_sku and bq_plan_sku print it, or a module's,
   "<SKU>@<entry point>", which sets t->module) names: the inverse of bq__sku_of, for tools. The result's SKU must be the very string given. A GEMM
   with f32 activation scales and other weight scales comes back as QuantizedLinear (whose
   SKU names its GEMM alone); every other GEMM as SmoothQuantLinear per token. */
BQ__FN BQ__UNUSED bq_status bq__desc_from_sku(const char *sku, bq_desc *out, bq__target *t) {
  static const bq_granularity grans[] = {BQ_PER_TENSOR, BQ_PER_CHANNEL, BQ_PER_TOKEN, BQ_PER_GROUP, BQ_PER_BLOCK};
  char buf[256], *tok[16];
  int n = 0, ok = 0;
  bq_desc d;
  memset(&d, 0, sizeof d);
  memset(t, 0, sizeof *t);
  if (!sku || !*sku || strlen(sku) >= sizeof buf)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "SKU (%.60s) is empty or too long", sku ? sku : "NULL");
  memcpy(buf, sku, strlen(sku) + 1);
  char *entry = strchr(buf, '@'); /* a module: "<SKU>@<entry point>" */
  if (entry) *entry++ = 0;
  for (char *p = buf; n < 16;) {
    tok[n++] = p;
    if (!(p = strchr(p, '.'))) break;
    *p++ = 0;
  }
  /* the target: sm_90, sm_90a or compute_90 */
  const char *tn = tok[n - 1], *num = !strncmp(tn, "sm_", 3) ? tn + 3 : !strncmp(tn, "compute_", 8) ? tn + 8 : NULL;
  char *end = NULL;
  long arch = num && *num >= '0' && *num <= '9' ? strtol(num, &end, 10) : -1;
  t->ptx = num == tn + 8;
  t->arch_a = end && !strcmp(end, "a") && !t->ptx;
  int target_ok = arch > 0 && arch < 1000 && end && (!*end || t->arch_a);
  t->arch = (int)arch;
  bq_dtype a[4] = {BQ_DTYPE_DEFAULT, BQ_DTYPE_DEFAULT, BQ_DTYPE_DEFAULT, BQ_DTYPE_DEFAULT};
  static char no_range[] = "q[0,0]"; /* FP8 SKUs name no q-range: parse them as if they did */
  if (n >= 8 && n < 16 && (!strcmp(tok[4], "e4m3") || !strcmp(tok[4], "e5m2"))) {
    memmove(&tok[6], &tok[5], (size_t)(n - 5) * sizeof tok[0]);
    tok[5] = no_range;
    n++;
  }
  if (!target_ok) {
  } else if (!strcmp(tok[0], "linear_weight_sums") && n == 4) {
    d.op = BQ_LINEAR_WEIGHT_SUMS;
    ok = 1;
  } else if (!strcmp(tok[0], "linear_gemm") && n == 8) {
    ok = !strncmp(tok[1], "a_", 2) && bq__dtype_from_name(tok[1] + 2, &a[0]) && !strncmp(tok[3], "out_", 4) &&
         bq__dtype_from_name(tok[3] + 4, &a[1]) && !strncmp(tok[4], "scale_", 6) &&
         bq__dtype_from_name(tok[4] + 6, &a[2]) && !strncmp(tok[5], "ascale_", 7) &&
         bq__dtype_from_name(tok[5] + 7, &a[3]);
    d.op = ok && a[3] == BQ_F32 && a[2] != BQ_F32 ? BQ_QUANTIZED_LINEAR : BQ_SMOOTHQUANT_LINEAR;
    d.granularity = BQ_PER_TOKEN;
    if (ok) d.int_type = a[0], d.out_type = d.float_type = a[1], d.scale_type = a[2];
  } else if (n == 9 || n == 10 || n == 11) {
    for (int op = BQ_QUANTIZE; op <= BQ_DYNAMIC_QUANTIZE; op++)
      if (!strcmp(tok[0], bq__op_name((bq_op)op))) d.op = (bq_op)op;
    if (!strcmp(tok[0], "rmsnorm_quantize")) d.op = BQ_RMSNORM_QUANTIZE;
    if (!strcmp(tok[0], "silu_mul_quantize")) d.op = BQ_GATED_QUANTIZE, d.activation = BQ_SILU;
    if (!strcmp(tok[0], "gelu_tanh_mul_quantize")) d.op = BQ_GATED_QUANTIZE, d.activation = BQ_GELU_TANH;
    for (int g = 0; g < 5; g++)
      if (!strcmp(tok[2], bq__gran_name(grans[g]))) d.granularity = grans[g], ok = 1;
    const int mn = !strncmp(tok[6], "scale_mn_", 9); /* an MN-major layout */
    if (mn) d.scale_layout = BQ_SCALES_MN_MAJOR;
    char tail = 0;
    if (n == 11 && d.op == BQ_DYNAMIC_QUANTIZE && !strcmp(tok[9], "pow2")) d.pow2_scales = 1, n = 10;
    ok = ok && d.op && (n == 10) == (d.op == BQ_DYNAMIC_QUANTIZE || bq__is_fused(d.op)) &&
         (!strcmp(tok[1], "fwd") || !strcmp(tok[1], "bwd")) &&
         bq__dtype_from_name(tok[3], &d.float_type) && bq__dtype_from_name(tok[4], &d.int_type) &&
         sscanf(tok[5], "q[%d,%d]%c", &d.qmin, &d.qmax, &tail) == 2 && !strncmp(tok[6], "scale_", 6) &&
         bq__dtype_from_name(tok[6] + (mn ? 9 : 6), &d.scale_type) &&
         (n == 9 || !strcmp(tok[8], "sym") || !strcmp(tok[8], "asym") || !strcmp(tok[8], "static"));
    d.direction = !strcmp(tok[1], "bwd") ? BQ_BACKWARD : BQ_FORWARD;
    d.asymmetric = n == 10 && !strcmp(tok[8], "asym");
  }
  char name[96];
  bq__kernel_src k;
  memset(&k, 0, sizeof k);
  if (ok && bq__normalize(&d, out, name, sizeof name) == BQ_SUCCESS) {
    const char *names[BQ__MAX_KERNELS];
    bq__kernels_of(out, t, names);
    for (int e = 0; entry && e < BQ__MAX_KERNELS; e++)
      if (names[e] && !strcmp(names[e], entry)) t->module = e + 1;
    if (!entry || t->module) bq__sku_of(out, t, &k);
  }
  if (strcmp(k.sku, sku) != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "SKU (%s) is not one this library (%s) names", sku, BQ_VERSION_STRING);
  return BQ_SUCCESS;
}

/* The families by name, for tools: bit i of bq__all_descs' set is bq__family_names[i] */
static const char *const bq__family_names[] = {"affine", "dynamic", "linear", "fused"};
#define BQ__ALL_FAMILIES 15u
#define BQ__FAMILY_LIST "affine, dynamic, linear or fused"
#define BQ__FAMILY_LIST_COMMAS "affine,dynamic,linear,fused"
BQ__FN BQ__UNUSED unsigned bq__family_bit(const char *name) {
  for (unsigned i = 0; i < sizeof bq__family_names / sizeof bq__family_names[0]; i++)
    if (!strcmp(name, bq__family_names[i])) return 1u << i;
  return 0;
}

/* Every kernel of the families asked for (1: quantize, dequantize, fake quantize; 2: dynamic
   quantize; 4: the linear layers' GEMMs, the weight sums and QuantizedLinear's activation
   kernels; 8: the fused producers) with each int type's full q-range: one normalized desc per SKU, each naming one
   kernel (warm it with bq__warm_one). Writes at most cap into out; returns how many. */
BQ__FN BQ__UNUSED int bq__all_descs(unsigned families, bq_desc *out, int cap) {
  static const bq_granularity grans[] = {BQ_PER_TENSOR, BQ_PER_CHANNEL, BQ_PER_TOKEN, BQ_PER_GROUP, BQ_PER_BLOCK};
  static const bq_dtype fts[] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16}, its[] = {BQ_S8, BQ_U8, BQ_E4M3, BQ_E5M2};
  const bq__target t = {80, 0, 0, 0}; /* SKUs differ in their target alone across targets */
  int n = 0, nseen = 0, seen_cap = 0;
  char(*seen)[256] = NULL;
  for (int op = BQ_QUANTIZE; op <= BQ_GATED_QUANTIZE; op++) {
    unsigned fam = op <= BQ_FAKE_QUANTIZE ? 1u : op == BQ_DYNAMIC_QUANTIZE ? 2u : bq__is_fused((bq_op)op) ? 8u : 4u;
    if (!(families & fam)) continue;
    int lin = fam == 4u;
    for (int act = 0; act < (op == BQ_GATED_QUANTIZE ? 2 : 1); act++)
    for (int dir = 0; dir < 2; dir++)
      for (int g = 0; g < 5; g++)
        for (int f = 0; f < 4; f++)
          for (int i = 0; i < 4; i++)
            for (int s = 0; s < 6; s++)
            for (int lay = 0; lay < 2; lay++)
              for (int asym = 0; asym < 2; asym++)
                for (int pw = 0; pw < (op == BQ_DYNAMIC_QUANTIZE ? 2 : 1); pw++)
                for (int o = 0; o < (lin ? 4 : 1); o++) {
                  bq_desc in, d[2];
                  char name[96];
                  memset(&in, 0, sizeof in);
                  in.op = (bq_op)op;
                  in.direction = dir ? BQ_BACKWARD : BQ_FORWARD;
                  in.granularity = grans[g];
                  in.float_type = fts[f];
                  in.int_type = its[i];
                  in.scale_type = s < 4 ? fts[s] : s == 4 ? BQ_UE8M0 : BQ_UE8M0X4;
                  in.scale_layout = (bq_scale_layout)lay;
                  in.pow2_scales = pw;
                  in.asymmetric = asym;
                  if (lin) in.out_type = fts[o];
                  if (op == BQ_GATED_QUANTIZE) in.activation = act ? BQ_GELU_TANH : BQ_SILU;
                  if (op == BQ_LINEAR_WEIGHT_SUMS) { /* its validation refuses any field but op */
                    memset(&in, 0, sizeof in);
                    in.op = BQ_LINEAR_WEIGHT_SUMS;
                  }
                  if (bq__normalize(&in, &d[0], name, sizeof name) != BQ_SUCCESS) continue;
                  int nd = 1;
                  if (op == BQ_QUANTIZED_LINEAR) {
                    bq__linear_activation_desc(&d[0], &in);
                    if (bq__normalize(&in, &d[1], name, sizeof name) == BQ_SUCCESS) nd = 2;
                  }
                  for (int j = 0; j < nd; j++) {
                    bq__kernel_src k;
                    memset(&k, 0, sizeof k);
                    bq__sku_of(&d[j], &t, &k);
                    int dup = 0;
                    for (int m = 0; m < nseen && !dup; m++) dup = !strcmp(seen[m], k.sku);
                    if (dup) continue;
                    if (nseen == seen_cap) {
                      seen_cap = seen_cap ? 2 * seen_cap : 256;
                      char(*grown)[256] = (char(*)[256])BQ_REALLOC(seen, (size_t)seen_cap * sizeof *seen);
                      if (!grown) { BQ_FREE(seen); return -1; }
                      seen = grown;
                    }
                    memcpy(seen[nseen++], k.sku, sizeof k.sku);
                    if (n < cap) out[n] = d[j];
                    n++;
                  }
                }
  }
  BQ_FREE(seen);
  return n;
}
#endif /* BARACUDA_QUANT_TOOLS */
