/* ---- SKUs back to descriptors, and every kernel, for tools --------------------------- */
/* Compiled where the including file defines BARACUDA_QUANT_TOOLS as well: the CLI, the
   Python package's shim, the kernel dumper and the tests that walk every kernel. */
#ifdef BARACUDA_QUANT_TOOLS
/* op belongs to the family the tools name group ("linear": the GEMMs and the weight sums) */
BQ__FN BQ__UNUSED int bq__op_in(bq_op op, const char *group) {
  const bq__family *f = bq__family_for(op, NULL);
  return f && !strcmp(f->group, group);
}
/* The normalized desc and target a SKU (as bq_sku and bq_plan_sku print it, or a module's,
   "<SKU>@<entry point>", which sets t->module) names: the inverse of bq__sku_of, for tools:
   the family's own form (its from_sku), or the elementwise families' (bq__sku_std). The
   result's SKU must be the very string given. */
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
  static char no_range[] = "q[0,0]"; /* FP8 SKUs name no q-range: parse them as if they did */
  bq_dtype it = BQ_DTYPE_DEFAULT;
  if (n >= 8 && n < 16 && bq__dtype_from_name(tok[4], &it) && bq__is_fp8(it)) {
    memmove(&tok[6], &tok[5], (size_t)(n - 5) * sizeof tok[0]);
    tok[5] = no_range;
    n++;
  }
  const bq__family *fam = NULL; /* the family whose form the tokens have, and d.op */
  for (int f = 0; target_ok && f < BQ__FAMILIES && !fam; f++)
    if (bq__families[f]->from_sku && bq__families[f]->from_sku(tok, n - 1, &d)) fam = bq__families[f], ok = 1;
  const int own = fam != NULL; /* (else the elementwise form, which a family with a form of its own may use too) */
  for (int f = 0; target_ok && f < BQ__FAMILIES && !fam; f++) /* the elementwise form: the op by its label */
    for (int i = 0; i < BQ__FAMILY_OPS && bq__families[f]->ops[i] && !fam && n >= 9 && n <= 13; i++)
      for (int act = BQ_ACTIVATION_DEFAULT; act <= BQ_GELU_TANH && !fam; act++) {
        bq_desc l;
        memset(&l, 0, sizeof l);
        l.op = bq__families[f]->ops[i];
        l.activation = (bq_activation)act;
        if (!strcmp(tok[0], bq__op_label(&l))) fam = bq__families[f], d.op = l.op, d.activation = l.activation;
      }
  if (fam && !own) {
    for (int g = 0; g < 5; g++)
      if (!strcmp(tok[2], bq__gran_name(grans[g]))) d.granularity = grans[g], ok = 1;
    const int mn = !strncmp(tok[6], "scale_mn_", 9); /* an MN-major layout */
    if (mn) d.scale_layout = BQ_SCALES_MN_MAJOR;
    char tail = 0;
    if (n >= 10 && !strcmp(tok[n - 2], "rot")) /* the fused rotation, before the target */
      d.rotation = 1, tok[n - 2] = tok[n - 1], n--;
    if (n >= 11 && !strcmp(tok[n - 2], "sr")) /* dynamic quantize's rounding, before the target */
      d.rounding = BQ_ROUND_STOCHASTIC, tok[n - 2] = tok[n - 1], n--;
    if (n == 11 && !strcmp(tok[9], "pow2")) d.pow2_scales = 1, n = 10;
    ok = ok && n <= 10 && (!strcmp(tok[1], "fwd") || !strcmp(tok[1], "bwd")) &&
         bq__dtype_from_name(tok[3], &d.float_type) && bq__dtype_from_name(tok[4], &d.int_type) &&
         sscanf(tok[5], "q[%d,%d]%c", &d.qmin, &d.qmax, &tail) == 2 && !strncmp(tok[6], "scale_", 6) &&
         bq__dtype_from_name(tok[6] + (mn ? 9 : 6), &d.scale_type) &&
         (n == 9 || !strcmp(tok[8], "sym") || !strcmp(tok[8], "asym") || !strcmp(tok[8], "static"));
    d.direction = !strcmp(tok[1], "bwd") ? BQ_BACKWARD : BQ_FORWARD;
    d.asymmetric = n == 10 && !strcmp(tok[8], "asym");
    if (n == 9 && !strcmp(tok[7], "sr")) d.rounding = BQ_ROUND_STOCHASTIC; /* (the affine family's variant) */
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

/* The families by name, for tools: bit i of bq__all_descs' set is bq__family_names[i]
   (each bq__family's group) */
static const char *const bq__family_names[] = {"affine", "dynamic", "linear", "fused", "mx", "rotate"};
#define BQ__ALL_FAMILIES 63u
#define BQ__FAMILY_LIST "affine, dynamic, linear, fused, mx or rotate"
#define BQ__FAMILY_LIST_COMMAS "affine,dynamic,linear,fused,mx,rotate"
BQ__FN BQ__UNUSED unsigned bq__family_bit(const char *name) {
  for (unsigned i = 0; i < sizeof bq__family_names / sizeof bq__family_names[0]; i++)
    if (!strcmp(name, bq__family_names[i])) return 1u << i;
  return 0;
}

/* Every kernel of the families asked for (1: quantize, dequantize, fake quantize; 2: dynamic
   quantize; 4: the linear layers' GEMMs, the weight sums and QuantizedLinear's activation
   kernels; 8: the fused producers) with each int type's full q-range: one normalized desc per
   SKU, each naming one kernel (warm it with bq__warm_one). Every field each desc has, by
   value, then the family's variants (bq__family.axes); the plans a plan holds come along.
   Writes at most cap into out; returns how many. */
BQ__FN BQ__UNUSED int bq__all_descs(unsigned families, bq_desc *out, int cap) {
  static const bq_granularity grans[] = {BQ_PER_TENSOR, BQ_PER_CHANNEL, BQ_PER_TOKEN, BQ_PER_GROUP, BQ_PER_BLOCK};
  static const bq_dtype fts[] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16}, its[] = {BQ_S8, BQ_U8, BQ_E4M3, BQ_E5M2};
  const bq__target t = {80, 0, 0, 0}; /* SKUs differ in their target alone across targets */
  int n = 0, nseen = 0, seen_cap = 0;
  char(*seen)[256] = NULL;
  int *slot = NULL; /* an open-addressed set over seen (2 seen_cap slots, -1 empty) */
  for (int fi = 0; fi < BQ__FAMILIES; fi++) {
    const bq__family *fam = bq__families[fi];
    if (!(families & bq__family_bit(fam->group))) continue;
    for (int oi = 0; oi < BQ__FAMILY_OPS && fam->ops[oi]; oi++) {
      const bq_op op = fam->ops[oi];
      int outer = 1, inner = 1;
      if (fam->axes) fam->axes(op, &outer, &inner);
      /* every combination, the variant inside fastest, the outer variant slowest */
      const int combos = outer * 2 * 5 * 4 * 4 * 6 * 2 * 2 * inner;
      for (int c = 0; c < combos; c++) {
        int r = c;
        const int y = r % inner;
        r /= inner;
        const int asym = r % 2, lay = r / 2 % 2, s = r / 4 % 6, i = r / 24 % 4, f = r / 96 % 4, g = r / 384 % 5,
                  dir = r / 1920 % 2, x = r / 3840;
        bq_desc in, d[3];
        char name[96];
        memset(&in, 0, sizeof in);
        in.op = op;
        in.direction = dir ? BQ_BACKWARD : BQ_FORWARD;
        in.granularity = grans[g];
        in.float_type = fts[f];
        in.int_type = its[i];
        in.scale_type = s < 4 ? fts[s] : s == 4 ? BQ_UE8M0 : BQ_UE8M0X4;
        in.scale_layout = (bq_scale_layout)lay;
        in.asymmetric = asym;
        if (fam->vary) fam->vary(&in, x, y);
        if (bq__normalize(&in, &d[0], name, sizeof name) != BQ_SUCCESS) continue;
        /* and the plans it holds, nested (a fused producer's dynamic quantize holds its
           stochastic rounding's quantize) */
        int nd = 1;
        while (nd < 3) {
          const bq__family *hf = bq__family_of(&d[nd - 1]);
          if (!hf || !hf->sub || !hf->sub(&d[nd - 1], &in) || bq__normalize(&in, &d[nd], name, sizeof name) != BQ_SUCCESS)
            break;
          nd++;
        }
        for (int j = 0; j < nd; j++) {
          bq__kernel_src k;
          memset(&k, 0, sizeof k);
          bq__sku_of(&d[j], &t, &k);
          if (nseen == seen_cap) { /* grow both, and rehash */
            seen_cap = seen_cap ? 2 * seen_cap : 256;
            char(*grown)[256] = (char(*)[256])BQ_REALLOC(seen, (size_t)seen_cap * sizeof *seen);
            int *slots = (int *)BQ_MALLOC((size_t)(2 * seen_cap) * sizeof *slots);
            if (!grown || !slots) { BQ_FREE(grown ? grown : seen); BQ_FREE(slots); BQ_FREE(slot); return -1; }
            seen = grown;
            BQ_FREE(slot);
            slot = slots;
            for (int m = 0; m < 2 * seen_cap; m++) slot[m] = -1;
            for (int m = 0; m < nseen; m++) {
              size_t h = (size_t)bq__fnv1a(seen[m], strlen(seen[m]), BQ__FNV_SEED) % (size_t)(2 * seen_cap);
              while (slot[h] >= 0) h = (h + 1) % (size_t)(2 * seen_cap);
              slot[h] = m;
            }
          }
          size_t h = (size_t)bq__fnv1a(k.sku, strlen(k.sku), BQ__FNV_SEED) % (size_t)(2 * seen_cap);
          while (slot[h] >= 0 && strcmp(seen[slot[h]], k.sku)) h = (h + 1) % (size_t)(2 * seen_cap);
          if (slot[h] >= 0) continue; /* seen */
          slot[h] = nseen;
          memcpy(seen[nseen++], k.sku, sizeof k.sku);
          if (n < cap) out[n] = d[j];
          n++;
        }
      }
    }
  }
  BQ_FREE(seen);
  BQ_FREE(slot);
  return n;
}
#endif /* BARACUDA_QUANT_TOOLS */
