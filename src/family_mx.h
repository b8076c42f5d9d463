/* ---- the microscaling family: MXFP8, MXFP4 and NVFP4 ------------------------------------- */
#include "../kernels_src/mx_abi.h" /* its entry points and parameter block, as mx.cu compiles them */

/* A descriptor of quantize, dequantize, fake quantize or dynamic quantize is a microscaling
   one, and this family's, where it names what only the microscaling formats have: E2M1
   storage, E4M3 scales (NVFP4), the blocked scale layout or a UE8M0 rule. (E4M3 and E5M2
   per group with UE8M0 scales in the other layouts and the library's rule is MXFP8 too, and
   stays with the affine and dynamic families, which serve it already.) */
BQ__FN int bq__is_mx(const bq_desc *d) {
  if (d->op != BQ_QUANTIZE && d->op != BQ_DEQUANTIZE && d->op != BQ_FAKE_QUANTIZE && d->op != BQ_DYNAMIC_QUANTIZE)
    return 0;
  return d->int_type == BQ_E2M1 || d->scale_type == BQ_E4M3 || d->scale_layout == BQ_SCALES_BLOCKED ||
         d->scale_rule != BQ_SCALE_RULE_DEFAULT ||
         /* (stochastic rounding and the fused rotation are this family's: MXFP8 in the other
            layouts comes here with them) */
         ((d->rounding != BQ_ROUND_NEAREST_EVEN || d->rotation) && d->granularity == BQ_PER_GROUP &&
          d->scale_type == BQ_UE8M0 && (d->int_type == BQ_E4M3 || d->int_type == BQ_E5M2));
}
BQ__FN int bq__is_mx_elem(bq_dtype t) { return t == BQ_E2M1 || t == BQ_E4M3 || t == BQ_E5M2; }

BQ__FN const char *bq__mx_label(const bq_desc *d) {
  return d->op == BQ_DYNAMIC_QUANTIZE ? "mx_dynamic_quantize" : d->op == BQ_DEQUANTIZE ? "mx_dequantize"
         : d->op == BQ_FAKE_QUANTIZE ? "mx_fake_quantize" : "mx_quantize";
}
static const char *const bq__mx_rules[] = {"default", "floor", "ceil", "even", "rceil", "rceil_sat", "torchao", "te"};
#define BQ__MX_RULES 8
BQ__FN int bq__mx_nv_rule(bq_scale_rule r) { return r == BQ_SCALE_NVFP4_TORCHAO || r == BQ_SCALE_NVFP4_TE; }
static const char *const bq__mx_layouts[] = {"rows", "mn", "blocked"};

/* The rules of a microscaling descriptor (docs/numerics.md, "Microscaling"), shared by the
   fused producers that emit the formats: per group; storage E2M1 (the default), E4M3 or E5M2,
   symmetric with no q-range; scales UE8M0 (the default), or E4M3 for E2M1 (NVFP4); any
   layout; a scale rule where the op computes its scales (dynamic: nonzero), of the scales'
   kind. name: the plan's, for messages. */
BQ__FN bq_status bq__mx_desc_rules(const bq_desc *in, bq_desc *d, const char *name, int dynamic) {
  if (!bq__is_float(d->float_type))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.float_type (%d, %s) must be BQ_F32, BQ_F64, BQ_F16 or BQ_BF16",
                    name, (int)d->float_type, bq__dtype_name(d->float_type));
  if (d->int_type == BQ_DTYPE_DEFAULT) d->int_type = BQ_E2M1;
  if (!bq__is_mx_elem(d->int_type))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.int_type (%d, %s) must be BQ_E2M1, BQ_E4M3 or BQ_E5M2 in a "
                    "microscaling format", name, (int)d->int_type, bq__dtype_name(d->int_type));
  if (d->qmin != 0 || d->qmax != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.qmin (%d) and desc.qmax (%d) must be 0: %s has no q-range",
                    name, d->qmin, d->qmax, bq__dtype_name(d->int_type));
  if (d->asymmetric != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.asymmetric (%d) must be 0: the microscaling formats are "
                    "symmetric", name, d->asymmetric);
  if (d->out_type != BQ_DTYPE_DEFAULT)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.out_type (%d, %s) applies to linear layers only", name,
                    (int)d->out_type, bq__dtype_name(d->out_type));
  if (d->scale_type == BQ_DTYPE_DEFAULT) d->scale_type = BQ_UE8M0;
  if (d->scale_type != BQ_UE8M0 && d->scale_type != BQ_E4M3)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_type (%d, %s) must be BQ_UE8M0 (MXFP8, MXFP4) or "
                    "BQ_E4M3 (NVFP4, with E2M1 storage)", name, (int)in->scale_type, bq__dtype_name(d->scale_type));
  if (d->scale_type == BQ_E4M3 && d->int_type != BQ_E2M1)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_type (%d, e4m3) is NVFP4's, whose elements are E2M1: "
                    "desc.int_type is %s", name, (int)BQ_E4M3, bq__dtype_name(d->int_type));
  if (d->direction != BQ_FORWARD && d->direction != BQ_BACKWARD)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.direction (%d) is not a bq_direction", name,
                    (int)d->direction);
  if (d->direction == BQ_BACKWARD && dynamic)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.direction (backward) is not defined for %s", name,
                    d->op == BQ_DYNAMIC_QUANTIZE ? "dynamic quantize" : "fused producers");
  if (d->granularity != BQ_PER_GROUP)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.granularity (%s) must be BQ_PER_GROUP: the microscaling "
                    "formats scale groups along the row (desc.int_type %s, desc.scale_type %s, desc.scale_layout %d, "
                    "desc.scale_rule %d)", name, bq__gran_name(d->granularity), bq__dtype_name(d->int_type),
                    bq__dtype_name(d->scale_type), (int)d->scale_layout, (int)d->scale_rule);
  if (d->scale_layout != BQ_SCALES_ROW_MAJOR && d->scale_layout != BQ_SCALES_MN_MAJOR &&
      d->scale_layout != BQ_SCALES_BLOCKED)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_layout (%d) must be BQ_SCALES_ROW_MAJOR, "
                    "BQ_SCALES_MN_MAJOR or BQ_SCALES_BLOCKED", name, (int)d->scale_layout);
  if ((int)d->scale_rule < BQ_SCALE_RULE_DEFAULT || d->scale_rule > BQ_SCALE_NVFP4_TE)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_rule (%d) is not a bq_scale_rule", name,
                    (int)d->scale_rule);
  if (d->scale_rule != BQ_SCALE_RULE_DEFAULT && !dynamic)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_rule (%d, %s) applies to dynamic quantize only (the "
                    "other ops read their scales)", name, (int)d->scale_rule, bq__mx_rules[d->scale_rule]);
  if (d->scale_rule != BQ_SCALE_RULE_DEFAULT && !bq__mx_nv_rule(d->scale_rule) && d->scale_type != BQ_UE8M0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_rule (%d, %s) names a UE8M0 rule: desc.scale_type is %s",
                    name, (int)d->scale_rule, bq__mx_rules[d->scale_rule], bq__dtype_name(d->scale_type));
  if (bq__mx_nv_rule(d->scale_rule) && d->scale_type != BQ_E4M3)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_rule (%d, %s) names an NVFP4 rule: desc.scale_type is %s",
                    name, (int)d->scale_rule, bq__mx_rules[d->scale_rule], bq__dtype_name(d->scale_type));
  if (d->pow2_scales != 0 && (d->pow2_scales != 1 || d->op != BQ_DYNAMIC_QUANTIZE || d->scale_type != BQ_UE8M0))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.pow2_scales (%d) must be 0 (UE8M0 scales are powers of two "
                    "already)", name, d->pow2_scales);
  d->pow2_scales = 0; /* (implied by UE8M0; one SKU either way) */
  if (d->rounding != BQ_ROUND_NEAREST_EVEN && d->rounding != BQ_ROUND_STOCHASTIC)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rounding (%d) is not a bq_rounding", name, (int)d->rounding);
  if (d->rounding == BQ_ROUND_STOCHASTIC && (d->op == BQ_DEQUANTIZE || d->direction == BQ_BACKWARD))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rounding (stochastic) applies where floats are rounded into "
                    "the format: quantize, fake quantize and dynamic quantize, forward", name);
  if (d->rotation != 0 && d->rotation != 1)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rotation (%d) must be 0 or 1", name, d->rotation);
  if (d->rotation && (d->op == BQ_FAKE_QUANTIZE || d->direction == BQ_BACKWARD))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rotation (1) applies to quantize, dynamic quantize and "
                    "dequantize, forward", name);
  if (d->random_signs != 0 && (d->random_signs != 1 || !d->rotation))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.random_signs (%d) must be 0, or 1 with desc.rotation", name,
                    d->random_signs);
  if (d->device < 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.device (%d) is negative", name, d->device);
  return BQ_SUCCESS;
}
BQ__FN bq_status bq__mx_normalize(const bq_desc *in, bq_desc *d, char *name, size_t name_size) {
  bq_status st;
  if ((st = bq__rule_no_activation(d))) return st;
  if (d->granularity == BQ_GRANULARITY_DEFAULT) d->granularity = BQ_PER_TENSOR;
  /* (plans are named by the op, as the other families' are: "quantize_per_group") */
  snprintf(name, name_size, "%s_%s%s", bq__op_name(d->op), bq__gran_name(d->granularity),
           d->direction == BQ_BACKWARD ? "_backward" : "");
  return bq__mx_desc_rules(in, d, name, d->op == BQ_DYNAMIC_QUANTIZE);
}

/* "mx_dynamic_quantize.fwd.bf16.e2m1.scale_ue8m0.blocked.floor.sm_90", with ".sr" before the
   target under stochastic rounding, then ".rot" with the fused rotation (its random signs are
   a run-time choice of the same kernel) */
BQ__FN void bq__mx_sku(const bq_desc *d, const bq__target *t, const char *tn, char *buf, size_t n) {
  (void)t;
  snprintf(buf, n, "%s.%s.%s.%s.scale_%s.%s.%s%s%s.%s", bq__mx_label(d), d->direction == BQ_BACKWARD ? "bwd" : "fwd",
           bq__dtype_name(d->float_type),
           bq__dtype_name(d->int_type), bq__dtype_name(d->scale_type), bq__mx_layouts[d->scale_layout],
           bq__mx_rules[d->scale_rule], d->rounding == BQ_ROUND_STOCHASTIC ? ".sr" : "",
           d->rotation ? ".rot" : "", tn);
}
BQ__FN int bq__mx_from_sku(char *const *all, int n, bq_desc *d) {
  static const bq_op ops[] = {BQ_QUANTIZE, BQ_DEQUANTIZE, BQ_FAKE_QUANTIZE, BQ_DYNAMIC_QUANTIZE};
  if (n >= 8 && !strcmp(all[n - 1], "rot")) d->rotation = 1, n--;
  if (n == 8 && !strcmp(all[7], "sr")) d->rounding = BQ_ROUND_STOCHASTIC, n = 7;
  if (n != 7 || (strcmp(all[1], "fwd") && strcmp(all[1], "bwd"))) return 0;
  d->direction = !strcmp(all[1], "bwd") ? BQ_BACKWARD : BQ_FORWARD;
  char *const tok[6] = {all[0], all[2], all[3], all[4], all[5], all[6]}; /* the label, then the types and form */
  int op = -1, lay = -1, rule = -1;
  for (int i = 0; i < 4; i++) {
    bq_desc l;
    memset(&l, 0, sizeof l);
    l.op = ops[i];
    if (!strcmp(tok[0], bq__mx_label(&l))) op = i;
  }
  for (int i = 0; i < 3; i++)
    if (!strcmp(tok[4], bq__mx_layouts[i])) lay = i;
  for (int i = 0; i < BQ__MX_RULES; i++)
    if (!strcmp(tok[5], bq__mx_rules[i])) rule = i;
  if (op < 0 || lay < 0 || rule < 0 || strncmp(tok[3], "scale_", 6)) return 0;
  d->op = ops[op];
  d->granularity = BQ_PER_GROUP;
  d->scale_layout = (bq_scale_layout)lay;
  d->scale_rule = (bq_scale_rule)rule;
  return bq__dtype_from_name(tok[1], &d->float_type) && bq__dtype_from_name(tok[2], &d->int_type) &&
         bq__dtype_from_name(tok[3] + 6, &d->scale_type);
}
/* the enumeration's variants (bq__all_descs): the element and scale types (E2M1 with UE8M0
   or E4M3, E4M3 and E5M2 with UE8M0) by the layouts; for dynamic quantize the rules, and
   the two roundings (stochastic where the op rounds) */
BQ__FN void bq__mx_axes(bq_op op, int *outer, int *inner) {
  *outer = 4 * 3;
  *inner = (op == BQ_DYNAMIC_QUANTIZE ? BQ__MX_RULES : 1) * 2 * 2;
}
BQ__FN void bq__mx_vary(bq_desc *in, int outer, int inner) {
  static const bq_dtype elem[] = {BQ_E2M1, BQ_E2M1, BQ_E4M3, BQ_E5M2}, scale[] = {BQ_UE8M0, BQ_E4M3, BQ_UE8M0, BQ_UE8M0};
  const int rules = in->op == BQ_DYNAMIC_QUANTIZE ? BQ__MX_RULES : 1;
  in->granularity = BQ_PER_GROUP;
  in->int_type = elem[outer % 4];
  in->scale_type = scale[outer % 4];
  in->scale_layout = (bq_scale_layout)(outer / 4);
  in->scale_rule = (bq_scale_rule)(inner % rules);
  in->rounding = (bq_rounding)(inner / rules % 2);
  in->rotation = inner / rules / 2;
  in->asymmetric = 0;
  in->qmin = in->qmax = 0;
}
/* args.amax_bound: dynamic quantize into UE8M0 scales (NVFP4's two levels take none); the
   tensor scales: NVFP4's */
BQ__FN unsigned bq__mx_owns(const bq_desc *d) {
  const unsigned sr = (d->rounding == BQ_ROUND_STOCHASTIC ? BQ__OWNS_SEED | BQ__OWNS_OFFSET : 0) |
                      (d->rotation ? BQ__OWNS_ROTATION : 0) | (d->random_signs ? BQ__OWNS_SEED : 0);
  if (d->scale_type == BQ_E4M3) return BQ__OWNS_TENSOR_SCALE | sr;
  return (d->op == BQ_DYNAMIC_QUANTIZE ? BQ__OWNS_AMAX_BOUND : 0) | sr;
}
BQ__FN const char *bq__mx_guarantee(const bq_desc *d) {
  if (d->rounding == BQ_ROUND_STOCHASTIC)
    return "microscaling (docs/numerics.md, \"Microscaling\"): each element rounded stochastically into its type "
           "(\"Stochastic rounding\": Philox4x32-10 keyed by args.seed at the element's index plus args.offset), "
           "saturating; scales by the plan's rule; bit-identical to the CPU reference";
  return "microscaling (docs/numerics.md, \"Microscaling\"): each element rounded once to nearest even into its "
         "type, saturating; scales by the plan's rule; bit-identical to the CPU reference";
}

BQ__FN void bq__mx_prelude(const bq_desc *d, const bq__target *t, bq__str *s) {
  (void)t;
  bq__prelude_types(d, s);
  bq__str_fmt(s, "#define BQ_OP %s\n#define BQ_DIR %s\n#define BQ_GRAN BQ_GRAN_GROUP\n#define BQ_ASYM 0\n"
              "#define BQ_MX_LAYOUT %d\n#define BQ_MX_RULE %d\n#define BQ_SR %d\n#define BQ_MX_ROT %d\n",
              bq__spec("OP", d->op), bq__spec("DIR", d->direction), (int)d->scale_layout, (int)d->scale_rule,
              d->rounding == BQ_ROUND_STOCHASTIC, d->rotation);
}
BQ__FN int bq__mx_vec(const bq_desc *d) { return 16 / bq__dtype_size(d->float_type); }

/* The problem: [rows, cols] in groups of G along the row (E2M1: G, cols and the row strides
   even, two codes a byte); the scales in the layout (blocked: group_row_stride 0, the
   layout's own padded extent) */
#define BQ__MX_MAX_GROUP 4096
BQ__FN bq_status bq__mx_view(const bq_plan *p, const bq_args *a, bq__view *v) {
  const bq_desc *d = &p->desc;
  if (a && d->scale_layout == BQ_SCALES_BLOCKED && a->group_row_stride != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_row_stride (%lld) must be 0 with desc.scale_layout "
                    "BQ_SCALES_BLOCKED (its extent is the padded tiles')", p->name, (long long)a->group_row_stride);
  bq_status st = bq__view_of(p, a, v);
  if (st) return st;
  if (v->group > BQ__MX_MAX_GROUP)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: args.group_size (%lld) is larger than %d, the largest microscaling "
                    "group offered", p->name, (long long)v->group, BQ__MX_MAX_GROUP);
  const int codes = d->direction == BQ_FORWARD && d->op != BQ_FAKE_QUANTIZE; /* the call moves codes */
  if (d->int_type == BQ_E2M1 && codes) {
    if (v->group % 2)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_size (%lld) is odd: E2M1 packs two elements a byte, "
                      "so groups must be even", p->name, (long long)v->group);
    const int64_t xs = d->op == BQ_DEQUANTIZE ? v->xs : v->ys; /* the codes' stride */
    if (xs % 2)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.%s_row_stride (%lld) is odd: E2M1 rows start on a byte", p->name,
                      d->op == BQ_DEQUANTIZE ? "x" : "y", (long long)xs);
  }
  if (d->scale_layout == BQ_SCALES_BLOCKED) v->grs = 0;
  return BQ_SUCCESS;
}
BQ__FN bq_status bq__mx_shape(const bq_plan *p, const bq_args *a) {
  bq__view v;
  return bq__mx_view(p, a, &v);
}
BQ__FN int bq__mx_nv(const bq_plan *p) { return p->desc.scale_type == BQ_E4M3; }
/* NVFP4 dynamic quantize computing the tensor scale: the amax passes, whose first has at
   most 8 blocks an SM (each a partial amax in the workspace) */
BQ__FN int bq__mx_two_pass(const bq_plan *p, const bq_args *a) {
  return bq__mx_nv(p) && p->desc.op == BQ_DYNAMIC_QUANTIZE && a && !a->tensor_scale;
}
BQ__FN int64_t bq__mx_amax_blocks(const bq_plan *p, const bq_args *a) {
  const int64_t blocks = bq__grid(a->rows * a->cols, 256), cap = (int64_t)bq__limits_of(p).sms * 8;
  return blocks < cap ? blocks : cap;
}
BQ__FN size_t bq__mx_workspace(const bq_plan *p, const bq_args *a) {
  if (!bq__mx_two_pass(p, a) || a->rows <= 0 || a->cols <= 0 || a->rows > BQ__MAX_ELEMS / a->cols) return 0;
  return (size_t)bq__mx_amax_blocks(p, a) * 4 + 4; /* the partials, then Transformer Engine's encode factor */
}
/* bq_mx_lanes takes a call (returning log2 of the lanes a group spans, else -1) where a
   group is 2^k (k <= 5) pieces of 16 bytes of floats, and every piece of each stream is
   aligned to its size: the floats' 16 bytes, the codes' 16 / T (E2M1: half that) */
BQ__FN int bq__mx_lanes(const bq_desc *d, const bq_args *a, const bq__view *v) {
  const int T = bq__dtype_size(d->float_type), E = 16 / T, cb = d->int_type == BQ_E2M1 ? E / 2 : E;
  const int k = v->group % E ? -1 : bq__pow2_log(v->group / E, 0, 5);
  if (k < 0) return -1;
  const int bwd = d->direction == BQ_BACKWARD, deq = d->op == BQ_DEQUANTIZE;
  const int codes = !bwd && d->op != BQ_FAKE_QUANTIZE; /* one stream is codes */
  /* each stream: its pointer and row stride in bytes, and the piece's size */
  const void *ptr[3] = {bwd ? a->dy : a->x, bwd ? (const void *)a->dx : a->y, bwd && !deq ? a->x : NULL};
  const int64_t st[3] = {bwd ? v->ys : v->xs, bwd ? v->xs : v->ys, v->xs};
  for (int i = 0; i < 3; i++) {
    if (!ptr[i]) continue;
    const int is_code = codes && i == (deq ? 0 : 1);
    const int64_t sb = is_code ? (d->int_type == BQ_E2M1 ? st[i] / 2 : st[i]) : st[i] * T, piece = is_code ? cb : 16;
    if ((uintptr_t)ptr[i] % (uintptr_t)piece || sb % piece) return -1;
  }
  return k;
}
/* bq_mx_lanes' pieces a lane, as a power of two: 1 (two) for quantize forward without the
   rotation where a group is two pieces or more and the codes' base and row stride lie on the
   grid of two pieces' codes, else 0 (one). Dequantize keeps one: two pieces a lane made
   its large rows a third slower */
static int bq__mx_force_lacc = -1; /* tests: 0 or 1 (where allowed) instead of the rule */
BQ__FN int bq__mx_lacc(const bq_desc *d, const bq_args *a, const bq__view *v, int lsh) {
  if (lsh < 1 || d->rotation || d->direction == BQ_BACKWARD || d->op != BQ_QUANTIZE) return 0;
  const int T = bq__dtype_size(d->float_type), E = 16 / T, cb = d->int_type == BQ_E2M1 ? E / 2 : E;
  const int64_t sb = d->int_type == BQ_E2M1 ? v->ys / 2 : v->ys;
  if ((uintptr_t)a->y % (uintptr_t)(2 * cb) || sb % (2 * cb)) return 0;
  return bq__mx_force_lacc >= 0 ? bq__mx_force_lacc : 1;
}
BQ__FN bq_status bq__mx_validate(const bq_plan *p, const bq_args *a, bq__view *v) {
  bq_status st = bq__mx_view(p, a, v);
  const bq_desc *d = &p->desc;
  if (st || v->numel == 0) return st;
  const int dyn = d->op == BQ_DYNAMIC_QUANTIZE, deq = d->op == BQ_DEQUANTIZE, bwd = d->direction == BQ_BACKWARD;
  const int T = bq__dtype_size(d->float_type), fake = d->op == BQ_FAKE_QUANTIZE;
  if (bwd) {
    if ((st = bq__check_ptr(p, "args.dy", a->dy, T))) return st;
    if ((st = bq__check_ptr(p, "args.dx", a->dx, T))) return st;
    if (!deq && (st = bq__check_ptr(p, "args.x", a->x, T))) return st;
  } else {
    if ((st = bq__check_ptr(p, "args.x", a->x, deq ? 1 : T))) return st;
    if ((st = bq__check_ptr(p, "args.y", a->y, deq || fake ? T : 1))) return st;
  }
  if ((st = bq__check_ptr(p, dyn ? "args.out_scales" : "args.scales", dyn ? a->out_scales : a->scales, 1))) return st;
  if (!dyn && a->zero_points)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.zero_points must be NULL: the microscaling formats are "
                    "symmetric", p->name);
  if (d->rotation) {
    if ((st = bq__rotation_block_check(p->name, a->rotation_block, v->cols))) return st;
    if (bq__mx_lanes(d, a, v) < 0 || a->rotation_block > 32 * (16 / T))
      return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: the fused rotation (desc.rotation) takes rows whose streams start on "
                      "the 16-byte grid, groups (args.group_size %lld) of 2^k 16-byte accesses of floats (k <= 5) and "
                      "blocks (args.rotation_block %lld) of at most 32 of them; BQ_HADAMARD, then this op, gives the "
                      "same bits", p->name, (long long)v->group, (long long)a->rotation_block);
  }
  if (bq__mx_nv(p)) {
    if ((!dyn || a->tensor_scale) && (st = bq__check_ptr(p, "args.tensor_scale", a->tensor_scale, 4))) return st;
    if (bq__mx_two_pass(p, a) && (st = bq__check_ptr(p, "args.out_tensor_scale", a->out_tensor_scale, 4))) return st;
  }
  return BQ_SUCCESS;
}
BQ__FN bq_status bq__mx_check(const bq_plan *p, const bq_args *a) {
  bq__view v;
  return bq__mx_validate(p, a, &v);
}

/* Tests: the entry point every run takes (BQ__MX_ANY serves every group size), -1: the
   host's choice */
static int bq__mx_force_entry = -1;

BQ__FN bq_status bq__mx_run(const bq_plan *p, const bq_args *a, void *ws, size_t ws_bytes, void *stream) {
  bq__view v;
  bq_status st = bq__mx_validate(p, a, &v);
  if (st || v.numel == 0) return st;
  const bq_desc *d = &p->desc;
  bq_mx_params k;
  memset(&k, 0, sizeof k);
  k.x = (uint64_t)(uintptr_t)a->x;
  k.y = (uint64_t)(uintptr_t)a->y;
  k.dy = (uint64_t)(uintptr_t)a->dy;
  k.dx = (uint64_t)(uintptr_t)a->dx;
  k.scales = (uint64_t)(uintptr_t)(d->op == BQ_DYNAMIC_QUANTIZE ? a->out_scales : a->scales);
  k.tensor_scale = (uint64_t)(uintptr_t)a->tensor_scale;
  k.rows = v.rows;
  k.cols = v.cols;
  k.xs = v.xs;
  k.ys = v.ys;
  k.group = v.group;
  k.ngroups = v.ngroups;
  k.grs = v.grs;
  k.bound = d->op == BQ_DYNAMIC_QUANTIZE ? a->amax_bound : 0;
  k.seed_lo = (uint32_t)a->seed, k.seed_hi = (uint32_t)(a->seed >> 32);
  k.offset = a->offset;
  if (d->rotation) { /* (validated: a power of two, bq_mx_lanes' call) */
    k.rlog2 = bq__hadamard_log2(a->rotation_block);
    k.rsigns = d->random_signs;
  }
  /* dynamic quantize into the blocked layout walks the padded tiles, whose padding entries
     it writes 0 */
  const int pad = d->op == BQ_DYNAMIC_QUANTIZE && d->scale_layout == BQ_SCALES_BLOCKED;
  const int64_t wrows = pad ? (v.rows + 127) / 128 * 128 : v.rows;
  k.pgroups = pad ? (v.ngroups + 3) / 4 * 4 : v.ngroups;
  k.items = wrows * k.pgroups;
  /* the rows in pieces of 16 bytes of floats, where they hold whole ones (bq_mx_lanes, and
     bq_mx_amax where x's rows are on the 16-byte grid) */
  const int T = bq__dtype_size(d->float_type);
  if (v.cols % (16 / T) == 0) {
    k.ppr = v.cols / (16 / T);
    k.fast = v.rows * k.ppr < ((int64_t)1 << 31);
    if (k.fast) k.fd = bq__make_fastdiv((uint32_t)k.ppr);
    k.avec = (uintptr_t)a->x % 16 == 0 && (v.xs * T) % 16 == 0;
  }
  if (bq__mx_two_pass(p, a)) {
    if ((st = bq__check_workspace(p, ws, ws_bytes, bq__mx_workspace(p, a)))) return st;
    k.amax = (uint64_t)(uintptr_t)ws;
    k.out_tensor_scale = (uint64_t)(uintptr_t)a->out_tensor_scale;
    k.nparts = (int)bq__mx_amax_blocks(p, a);
    if ((st = bq__launch(p, BQ__MX_AMAX, k.nparts, 1, 256, 0, &k, stream))) return st;
    k.finish = 1;
    if ((st = bq__launch(p, BQ__MX_AMAX, 1, 1, 256, 0, &k, stream))) return st;
    k.finish = 0;
    k.tensor_scale = k.out_tensor_scale;
    k.enc = k.amax + 4 * (uint64_t)k.nparts; /* (the finishing block wrote it) */
  }
  int e = v.group == 16 ? BQ__MX_G16 : v.group == 32 ? BQ__MX_G32 : BQ__MX_ANY;
  /* bq_mx_lanes where its grid holds, but for dynamic quantize without the rotation: there the
     group kernels, whose thread reduces its group's amax alone, ran faster (MXFP8 bf16
     [8192, 4096] 32 us against 44 on the H200). A test may force either. */
  const int f = bq__mx_force_entry;
  const int lsh = bq__mx_lanes(d, a, &v);
  if (lsh >= 0 && (f >= 0 ? f == BQ__MX_LANES : d->op != BQ_DYNAMIC_QUANTIZE || d->rotation)) {
    e = BQ__MX_LANES;
    k.lshift = lsh;
    k.lacc = bq__mx_lacc(d, a, &v, lsh);
    k.items = v.rows * k.ppr >> k.lacc; /* (ppr and its divider set above: G is whole pieces) */
    k.prows = wrows;
  }
  if (f >= 0 && f != BQ__MX_LANES) e = f;
  const int64_t blocks = bq__grid(k.items, 256), cap = (int64_t)bq__limits_of(p).sms * 16;
  return bq__launch(p, e, blocks < cap ? blocks : cap, 1, 256, 0, &k, stream);
}
/* the amax pass is NVFP4 dynamic quantize's alone */
BQ__FN int bq__mx_has(const bq_desc *d, const bq__target *t, int e) {
  (void)t;
  return e != BQ__MX_AMAX || (d->scale_type == BQ_E4M3 && d->op == BQ_DYNAMIC_QUANTIZE);
}
/* the typical problem's groups are the format's (16 for NVFP4, 32 else), its rotation blocks 32 */
BQ__FN void bq__mx_typical(const bq_desc *d, bq_args *a, void *ptr) {
  a->group_size = d->scale_type == BQ_E4M3 ? 16 : 32;
  if (d->rotation) a->rotation_block = 32; /* (a block every float type's bq_mx_lanes takes) */
  if (d->scale_type == BQ_E4M3 && d->op != BQ_DYNAMIC_QUANTIZE) a->tensor_scale = ptr;
  if (d->scale_type == BQ_E4M3 && d->op == BQ_DYNAMIC_QUANTIZE) a->out_tensor_scale = ptr;
}

static const bq__family bq__mx_family = {
  {BQ_QUANTIZE, BQ_DEQUANTIZE, BQ_FAKE_QUANTIZE, BQ_DYNAMIC_QUANTIZE},
  {"quantize", "dequantize", "fake_quantize", "dynamic_quantize"}, "mx",
  bq__mx_normalize, bq__mx_label, bq__mx_sku, bq__mx_from_sku, bq__mx_axes, bq__mx_vary, bq__mx_owns,
  bq__mx_guarantee, "mx.cu", bq__text_mx_cu, bq__mx_prelude, bq__mx_vec, 0, bq__mx_shape, bq__mx_check,
  bq__mx_workspace, bq__mx_run, bq__mx_has, NULL,
  {{NULL}, {NULL}, {NULL},
   {BQ_ENTRY_NAME(BQ_FN_MX16), BQ_ENTRY_NAME(BQ_FN_MX32), BQ_ENTRY_NAME(BQ_FN_MX_ANY), BQ_ENTRY_NAME(BQ_FN_MX_AMAX),
    BQ_ENTRY_NAME(BQ_FN_MX_LANES)},
   {NULL}},
  NULL, NULL, bq__mx_typical, 0};
