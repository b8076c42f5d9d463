/* ---- the families ---------------------------------------------------------------------- */
/* Every family this header holds, in the order of their ops (the tools' enumeration's) */
static const bq__family *const bq__families[] = {&bq__affine_family, &bq__dynamic_family, &bq__linear_family,
                                                 &bq__weight_sums_family, &bq__fused_family, &bq__mx_family,
                                                 &bq__rotate_family, &bq__fp8_linear_family};
#define BQ__FAMILIES ((int)(sizeof bq__families / sizeof bq__families[0]))
/* The family serving op (NULL: op is no bq_op); *index: op's in its lists */
BQ__FN const bq__family *bq__family_for(bq_op op, int *index) {
  for (int f = 0; f < BQ__FAMILIES; f++)
    for (int i = 0; i < BQ__FAMILY_OPS && bq__families[f]->ops[i]; i++)
      if (bq__families[f]->ops[i] == op) {
        if (index) *index = i;
        return bq__families[f];
      }
  return NULL;
}
/* a desc's (normalized or not): the microscaling family's where it names a microscaling
   format (bq__is_mx), else its op's */
BQ__FN const bq__family *bq__family_of(const bq_desc *d) {
  return bq__is_mx(d) ? &bq__mx_family : bq__family_for(d->op, NULL);
}
BQ__FN const char *bq__op_name(bq_op op) {
  int i = 0;
  const bq__family *f = bq__family_for(op, &i);
  return f ? f->op_names[i] : "unknown_op";
}
BQ__FN const char *bq__op_label(const bq_desc *d) {
  const bq__family *f = bq__family_of(d);
  return f && f->label ? f->label(d) : bq__op_name(d->op);
}

/* Validate a descriptor and fill in its defaults: its family's rules. */
BQ__FN bq_status bq__normalize(const bq_desc *in, bq_desc *d, char *name, size_t name_size) {
  if (!in) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_plan_select: desc is NULL");
  *d = *in;
  const bq__family *f = bq__family_of(d);
  if (!f) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_plan_select: desc.op (%d) is not a bq_op", (int)d->op);
  if (f != &bq__mx_family && f != &bq__fused_family && d->scale_rule != BQ_SCALE_RULE_DEFAULT)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_rule (%d) applies to microscaling dynamic quantize and "
                    "the fused producers only", bq__op_name(d->op), (int)d->scale_rule);
  if (f != &bq__mx_family && f != &bq__affine_family && f != &bq__dynamic_family && f != &bq__fused_family &&
      d->rounding != BQ_ROUND_NEAREST_EVEN)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rounding (%d) must be BQ_ROUND_NEAREST_EVEN: stochastic "
                    "rounding is offered by quantize, fake quantize, dynamic quantize (integer, FP8 and "
                    "microscaling storage) and the fused producers (integer and FP8)",
                    bq__op_name(d->op), (int)d->rounding);
  const int rotates = f == &bq__mx_family || f == &bq__dynamic_family || f == &bq__affine_family ||
                      f == &bq__fused_family;
  if (!rotates && d->rotation != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rotation (%d) must be 0: the fused rotation is quantize's, "
                    "dequantize's, dynamic quantize's and the fused producers'; BQ_HADAMARD rotates alone",
                    bq__op_name(d->op), d->rotation);
  if (f != &bq__rotate_family && d->random_signs != 0 && !(rotates && d->rotation == 1))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.random_signs (%d) applies to BQ_HADAMARD and the fused "
                    "rotation (desc.rotation) only", bq__op_name(d->op), d->random_signs);
  return f->normalize(in, d, name, name_size);
}

/* ---- kernel specialization ------------------------------------------------------------------ */
/* The entry points with code for d on t, by the family's enum (NULL: none); returns how many */
BQ__FN int bq__kernels_of(const bq_desc *d, const bq__target *t, const char *out[BQ__MAX_KERNELS]) {
  const bq__family *f = bq__family_of(d);
  const char *const *names = f->kernels[bq__gran_code(d->granularity)];
  int n = 0;
  for (int e = 0; e < BQ__MAX_KERNELS; e++) {
    out[e] = names[e] && (!f->has || f->has(d, t, e)) ? names[e] : NULL;
    n += out[e] != NULL;
  }
  return n;
}

/* A module's SKU: the plan's, then '@' and its entry point */
BQ__FN void bq__sku_module(const bq__target *t, bq__kernel_src *k) {
  const int m = t->module - 1;
  if (m < 0) return;
  const size_t n = strlen(k->sku);
  if (m >= BQ__MAX_KERNELS || !k->kernels[m]) k->sku[0] = 0;
  else snprintf(k->sku + n, sizeof k->sku - n, "@%s", k->kernels[m]);
}

/* The SKU names a plan's kernels: its family's form of the desc, and the target. A module
   (t->module = e + 1) holds entry point e alone, named after it: "<SKU>@bq_affine_lean".
   A module of an entry point d lacks gets no kernels and an empty SKU. */
BQ__FN void bq__sku_of(const bq_desc *d, const bq__target *t, bq__kernel_src *k) {
  char tn[32];
  bq__target_name(t, tn, sizeof tn);
  bq__kernels_of(d, t, k->kernels);
  k->target = *t;
  const int m = t->module - 1;
  if (m >= 0)
    for (int e = 0; e < BQ__MAX_KERNELS; e++)
      if (e != m) k->kernels[e] = NULL;
  bq__family_of(d)->sku(d, t, tn, k->sku, sizeof k->sku);
  bq__sku_module(t, k);
  size_t i = 0; /* the file name: the SKU with [ ] , made safe */
  for (; k->sku[i] && i + 1 < sizeof k->file; i++)
    k->file[i] = strchr("[],", k->sku[i]) ? '_' : k->sku[i];
  k->file[i] = 0;
}

/* The prelude: the SKU, the names (bq__spec_names), then the family's specialization. The
   emulated tests compile the very same text (tests/emu_prelude.c). */
BQ__FN void bq__prelude(const bq_desc *d, const bq__kernel_src *k, bq__str *s) {
  bq__str_fmt(s, "// %s\n", k->sku);
  bq__spec_names(s);
  bq__family_of(d)->prelude(d, &k->target, s);
}

/* The entry points a source compiles: BQ_E_<NAME> for each (bq_affine_lean: BQ_E_AFFINE_LEAN);
   the kernel files compile an entry point only where its macro is defined */
BQ__FN void bq__entry_defines(const char *const names[BQ__MAX_KERNELS], bq__str *s) {
  for (int e = 0; e < BQ__MAX_KERNELS; e++) {
    if (!names[e]) continue;
    bq__str_cat(s, "#define BQ_E_");
    for (const char *c = names[e] + 3; *c; c++) bq__str_fmt(s, "%c", *c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
    bq__str_cat(s, " 1\n");
  }
}

BQ__FN bq_status bq__build_source(const void *data, bq__kernel_src *k) {
  const bq_desc *d = (const bq_desc *)data;
  const bq__family *f = bq__family_of(d);
  bq__str *s = &k->source;
  bq__prelude(d, k, s);
  bq__entry_defines(k->kernels, s);
  bq__str_cat(s, "#line 1 \"common.cuh\"\n");
  bq__str_cat(s, bq__text_common_cuh());
  bq__str_fmt(s, "#line 1 \"%s\"\n", f->src_name);
  bq__str_cat(s, f->src());
  return s->oom ? bq__fail(BQ_ERROR_OUT_OF_MEMORY, "out of memory building kernel source") : BQ_SUCCESS;
}

/* ---- the compile target ------------------------------------------------------------ */
/* sm must be a compute capability, 10 * major + minor, and one the kernels run on (their
   bf16 conversions, cp.async and int8 mma.sync are sm_80's): checked before NVRTC is
   touched. An older one is a real GPU this library does not support, not a bad value. */
#define BQ__MIN_SM 80
BQ__FN bq_status bq__check_sm(int sm) {
  if (sm < 10 || sm > 999)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "sm (%d) is not a compute capability 10 * major + minor", sm);
  if (sm < BQ__MIN_SM)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED,
                    "sm (%d): compute capability %d.%d is older than %d.%d, the oldest this library supports", sm,
                    sm / 10, sm % 10, BQ__MIN_SM / 10, BQ__MIN_SM % 10);
  return BQ_SUCCESS;
}

/* The one choice of what NVRTC builds for a desc on an arch, shared by bq_plan_select (the
   device's sm), bq_cache_warm and bq_sku, so that what is warmed and named is what select
   loads. A cubin for sm itself when NVRTC supports that arch and force_ptx is off; the
   linear GEMMs get the arch-specific sm_90a (the warpgroup-MMA tiles) there on sm_90 when
   wgmma is on. Otherwise PTX for the newest virtual arch NVRTC supports at or below sm,
   which the driver finishes (devices newer than NVRTC). bq__target_for takes force_ptx
   and wgmma from the environment; tools may ask for either setting. */
BQ__FN bq_status bq__target_pick(const bq_desc *d, int sm, int force_ptx, int wgmma, bq__target *t) {
  memset(t, 0, sizeof *t);
  bq_status st = bq__check_sm(sm);
  if (st) return st;
  bq__nvrtc_id id;
  if ((st = bq__nvrtc_identity(&id))) return st;
  int exact = 0, best = -1, oldest = INT_MAX;
  for (int i = 0; i < id.num_archs; i++) {
    if (id.archs[i] == sm) exact = 1;
    if (id.archs[i] <= sm && id.archs[i] > best) best = id.archs[i];
    if (id.archs[i] < oldest) oldest = id.archs[i];
  }
  if (best < 0)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "sm (%d) is older than every arch NVRTC supports (oldest sm_%d)",
                    sm, oldest);
  const bq__family *f = bq__family_of(d);
  if (f && sm < f->min_sm)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "desc.op (%s) needs compute capability %d.%d or newer (the device "
                    "is sm_%d)", bq__op_name(d->op), f->min_sm / 10, f->min_sm % 10, sm);
  if (f && !(exact && !force_ptx) && best < f->min_sm)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "desc.op (%s) needs PTX for compute capability %d.%d or newer, and "
                    "the newest arch NVRTC supports at or below sm_%d is sm_%d", bq__op_name(d->op), f->min_sm / 10,
                    f->min_sm % 10, sm, best);
  if (exact && !force_ptx) {
    t->arch = sm;
    t->arch_a = wgmma && sm == 90 && bq__family_of(d)->wgmma;
  } else {
    t->arch = best;
    t->ptx = 1;
  }
  return BQ_SUCCESS;
}

/* BARACUDA_QUANT_WGMMA=0 turns the warpgroup-MMA tiles off */
BQ__FN int bq__wgmma_env(void) { return bq__env_bool("BARACUDA_QUANT_WGMMA", 1); }

BQ__FN bq_status bq__target_for(const bq_desc *d, int sm, bq__target *t) {
  return bq__target_pick(d, sm, bq__env_flag("BARACUDA_QUANT_FORCE_PTX"), bq__wgmma_env(), t);
}

/* Prefix this thread's error message with who */
BQ__FN bq_status bq__refail(bq_status st, const char *who) {
  char msg[sizeof bq__err_buf];
  memcpy(msg, bq__err_buf, sizeof msg);
  return bq__fail(st, "%s: %s", who, msg);
}

/* ---- plans --------------------------------------------------------------------------- */
BQ__DEF bq_status bq_sku(const bq_desc *desc, int sm, char *buf, size_t buf_size) {
  bq_desc d;
  char name[96];
  bq_status st = bq__normalize(desc, &d, name, sizeof name);
  if (st) return st;
  if (!buf || buf_size == 0) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_sku: buf is NULL");
  bq__target t;
  if ((st = bq__target_for(&d, sm, &t))) return bq__refail(st, "bq_sku");
  bq__kernel_src k;
  memset(&k, 0, sizeof k);
  bq__sku_of(&d, &t, &k);
  if (strlen(k.sku) >= buf_size) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_sku: buf_size (%zu) is too small", buf_size);
  memcpy(buf, k.sku, strlen(k.sku) + 1);
  return BQ_SUCCESS;
}

/* The kernel source and full disk key a desc gets on an arch, for tools and tests. */
BQ__FN BQ__UNUSED bq_status bq__kernel_for(const bq_desc *desc, const bq__target *t, bq__kernel_src *k) {
  bq_desc d;
  char name[96];
  bq_status st = bq__normalize(desc, &d, name, sizeof name);
  memset(k, 0, sizeof *k);
  if (st) return st;
  bq__sku_of(&d, t, k);
  return bq__build_source(&d, k);
}

/* One module (t->module > 0) of the normalized desc d into the disk cache (a disk hit does
   nothing); *compiled says whether NVRTC ran. */
BQ__FN bq_status bq__warm_module(const bq_desc *d, const bq__target *t, int *compiled) {
  bq__kernel_src k;
  memset(&k, 0, sizeof k);
  bq__sku_of(d, t, &k);
  if (!k.sku[0]) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "the kernel has no entry point %d", t->module - 1);
  bq_status st = bq__build_source(d, &k);
  if (!st) {
    void *bin = NULL;
    size_t len = 0;
    int from_disk = 0;
    st = bq__obtain_binary(&k, 1, &bin, &len, &from_disk);
    if (!st) { if (from_disk) BQ__COUNT(disk_hits); else BQ__COUNT(misses); }
    if (!st && compiled) *compiled = !from_disk;
    BQ_FREE(bin);
  }
  BQ_FREE(k.source.p);
  return st;
}

/* Every module of d (t->module 0) or the one t names into the disk cache; *compiled counts
   the modules NVRTC compiled */
BQ__FN bq_status bq__warm_one(const bq_desc *d, const bq__target *t, int *compiled) {
  int c = 0;
  if (compiled) *compiled = 0;
  if (t->module) {
    bq_status st = bq__warm_module(d, t, &c);
    if (compiled) *compiled = c;
    return st;
  }
  const char *names[BQ__MAX_KERNELS];
  bq__kernels_of(d, t, names);
  for (int e = 0; e < BQ__MAX_KERNELS; e++) {
    if (!names[e]) continue;
    bq__target m = *t;
    m.module = e + 1;
    bq_status st = bq__warm_module(d, &m, &c);
    if (st) return st;
    if (compiled) *compiled += c;
  }
  return BQ_SUCCESS;
}

BQ__DEF bq_status bq_cache_warm(const bq_desc *desc, int sm) {
  pthread_once(&bq__stats_once, bq__stats_register);
  bq_desc d, q0, q;
  char name[96];
  bq__target t;
  bq_status st = bq__normalize(desc, &d, name, sizeof name);
  if (st) return st;
  if ((st = bq__target_for(&d, sm, &t))) return bq__refail(st, "bq_cache_warm");
  /* the kernels of the plans it holds too, nested, as select would load them */
  const bq_desc *h = &d;
  for (int depth = 0; depth < 2; depth++) {
    const bq__family *f = bq__family_of(h);
    if (!f->sub || !f->sub(h, &q0)) break;
    bq__target tq;
    if ((st = bq__normalize(&q0, &q, name, sizeof name))) return st;
    if ((st = bq__target_for(&q, sm, &tq))) return bq__refail(st, "bq_cache_warm");
    if ((st = bq__warm_one(&q, &tq, NULL))) return st;
    h = &q;
  }
  return bq__warm_one(&d, &t, NULL);
}

/* bq_cache_warm_many: the modules of the list, then threads that take them in turn (NVRTC
   13 compiles on several threads of a process at once) */
typedef struct bq__warm_job {
  bq_desc d;
  bq__target t; /* one module */
  int index;    /* its descriptor's */
  bq_status st;
  char msg[256];
} bq__warm_job;
typedef struct bq__warm_pool {
  bq__warm_job *jobs;
  int n, next;
} bq__warm_pool;
BQ__FN void *bq__warm_worker(void *arg) {
  bq__warm_pool *w = (bq__warm_pool *)arg;
  for (int i; (i = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED)) < w->n;) {
    bq__warm_job *j = &w->jobs[i];
    if ((j->st = bq__warm_module(&j->d, &j->t, NULL))) bq__copy(j->msg, sizeof j->msg, bq__err_buf);
  }
  return NULL;
}
/* the modules of desc on sm (and of the plans it holds, nested: QuantizedLinear's
   activations', a fused producer's dynamic quantize and that one's stochastic rounding)
   appended to *jobs */
BQ__FN bq_status bq__warm_jobs(const bq_desc *desc, int index, int sm, bq__warm_job **jobs, int *n, int *cap) {
  bq_desc d[3], q;
  char name[96];
  bq__target t[3];
  bq_status st = bq__normalize(desc, &d[0], name, sizeof name);
  if (!st) st = bq__target_for(&d[0], sm, &t[0]);
  int nd = 1;
  while (!st && nd < 3 && bq__family_of(&d[nd - 1])->sub && bq__family_of(&d[nd - 1])->sub(&d[nd - 1], &q)) {
    if (!(st = bq__normalize(&q, &d[nd], name, sizeof name))) st = bq__target_for(&d[nd], sm, &t[nd]);
    nd++;
  }
  if (st) return bq__refail(st, "bq_cache_warm_many");
  for (int k = 0; k < nd; k++) {
    const char *names[BQ__MAX_KERNELS];
    bq__kernels_of(&d[k], &t[k], names);
    for (int e = 0; e < BQ__MAX_KERNELS; e++) {
      if (!names[e]) continue;
      if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        bq__warm_job *grown = (bq__warm_job *)BQ_REALLOC(*jobs, (size_t)*cap * sizeof **jobs);
        if (!grown) return bq__fail(BQ_ERROR_OUT_OF_MEMORY, "bq_cache_warm_many: out of memory");
        *jobs = grown;
      }
      bq__warm_job *j = &(*jobs)[(*n)++];
      memset(j, 0, sizeof *j);
      j->d = d[k];
      j->t = t[k];
      j->t.module = e + 1;
      j->index = index;
    }
  }
  return BQ_SUCCESS;
}
BQ__DEF bq_status bq_cache_warm_many(const bq_desc *descs, int n, int sm, int threads) {
  pthread_once(&bq__stats_once, bq__stats_register);
  if (n < 0 || (n > 0 && !descs))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_cache_warm_many: descs (%p) and n (%d) name no list",
                    (const void *)descs, n);
  if (threads < 0) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_cache_warm_many: threads (%d) is negative", threads);
  bq_status st = bq__check_sm(sm);
  if (st) return st;
  bq__warm_pool w = {NULL, 0, 0};
  int cap = 0, bad = -1;
  bq_status first = BQ_SUCCESS;
  char msg[sizeof bq__err_buf];
  for (int i = 0; i < n; i++)
    if ((st = bq__warm_jobs(&descs[i], i, sm, &w.jobs, &w.n, &cap)) && bad < 0) {
      if (st == BQ_ERROR_OUT_OF_MEMORY) { BQ_FREE(w.jobs); return st; }
      bad = i, first = st;
      memcpy(msg, bq__err_buf, sizeof msg);
    }
  if (threads == 0) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    threads = c > 0 ? (int)c : 1;
  }
  if (threads > w.n) threads = w.n;
  if (threads > 64) threads = 64;
  pthread_t th[64];
  int started = 0;
  for (; started < threads - 1; started++) /* (this thread is the last worker) */
    if (pthread_create(&th[started], NULL, bq__warm_worker, &w)) break;
  bq__warm_worker(&w);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < w.n; i++) /* the first failure in the list */
    if (w.jobs[i].st && (bad < 0 || w.jobs[i].index < bad)) {
      bad = w.jobs[i].index, first = w.jobs[i].st;
      bq__copy(msg, sizeof msg, w.jobs[i].msg);
    }
  BQ_FREE(w.jobs);
  if (bad >= 0) return bq__fail(first, "bq_cache_warm_many: descs[%d]: %s", bad, msg);
  return BQ_SUCCESS;
}


/* Everything about a plan that needs no device: the normalized desc, its name, the
   kernel's shape. (The tests build plans this way to check argument validation on
   machines without a GPU; such a plan has no kernel and must never reach a launch.) */
BQ__FN bq_status bq__plan_init(const bq_desc *desc, bq_plan *p) {
  memset(p, 0, sizeof *p);
  bq_status st = bq__normalize(desc, &p->desc, p->name, sizeof p->name);
  if (st) return st;
  p->fam = bq__family_of(&p->desc);
  p->vec = p->fam->vec(&p->desc);
  bq__kernels_of(&p->desc, &p->target, p->kernels); /* (select names them again for its target) */
  pthread_mutex_init(&p->lock, NULL);
  return BQ_SUCCESS;
}

/* A typical problem for the dry run: [4096, 4096] (per tensor its 2^24 elements, per channel
   4096 channels of 4096, per group and per block 128), dense, every pointer 2^34 bytes from
   the next and aligned to 2^40, never dereferenced. */
BQ__FN size_t bq__typical_args(const bq_plan *p, bq_args *a) {
  memset(a, 0, sizeof *a);
  uintptr_t next = (uintptr_t)1 << 40;
#define BQ__FAKE_PTR() ((void *)(next += (uintptr_t)1 << 34))
  a->x = BQ__FAKE_PTR();
  a->y = BQ__FAKE_PTR();
  a->dy = BQ__FAKE_PTR();
  a->dx = BQ__FAKE_PTR();
  a->numel = (int64_t)4096 * 4096;
  a->rank = 2;
  a->shape[0] = a->shape[1] = 4096;
  a->rows = a->cols = a->n = 4096;
  a->group_size = 128;
  a->scale = 1.0;
  a->scales = BQ__FAKE_PTR();
  a->out_scales = BQ__FAKE_PTR();
  a->out_zero_points = p->desc.asymmetric ? (int32_t *)BQ__FAKE_PTR() : NULL;
  a->w = BQ__FAKE_PTR();
  a->w_scales = BQ__FAKE_PTR();
  a->w_sums = p->desc.asymmetric ? (const int32_t *)BQ__FAKE_PTR() : NULL;
  void *spare = BQ__FAKE_PTR();
  if (p->fam->typical) p->fam->typical(&p->desc, a, spare); /* (RMSNorm's weight) */
#undef BQ__FAKE_PTR
  return p->fam->workspace(p, a);
}
/* The entry points the plan's own run takes on the typical problem: a dry run, whose
   launches record and launch nothing (0 where the run refuses the problem) */
BQ__FN unsigned bq__plan_typical(const bq_plan *p) {
  bq_args a;
  const size_t ws = bq__typical_args(p, &a);
  bq__dry.plan = p;
  bq__dry.taken = 0;
  const bq_status st = p->fam->run(p, &a, ws ? (void *)((uintptr_t)1 << 39) : NULL, ws, NULL);
  const unsigned taken = bq__dry.taken;
  bq__dry.plan = NULL;
  return st ? 0 : taken;
}
/* Select loads the modules of the entry points a typical problem takes (bq__plan_typical);
   the others load when a run first takes them. Every one with BARACUDA_QUANT_LAZY=0, or
   where the dry run takes none. */
BQ__FN int bq__lazy(void) { return bq__env_bool("BARACUDA_QUANT_LAZY", 1); }
BQ__FN bq_status bq__plan_prime(bq_plan *p) {
  const unsigned want = bq__lazy() ? bq__plan_typical(p) : 0;
  for (int e = 0; e < BQ__MAX_KERNELS; e++) {
    bq__CUfunction f;
    if (!p->kernels[e] || (want && !(want >> e & 1))) continue;
    bq_status st = bq__plan_fn(p, e, &f);
    if (st) return st;
  }
  return BQ_SUCCESS;
}

BQ__FN bq_status bq__select(const bq_desc *desc, bq_plan **out, int *pushed) {
  if (!out) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_plan_select: plan is NULL");
  *out = NULL;
  bq_plan *p = (bq_plan *)BQ_MALLOC(sizeof *p);
  if (!p) return bq__fail(BQ_ERROR_OUT_OF_MEMORY, "bq_plan_select: out of memory");
  pthread_once(&bq__stats_once, bq__stats_register);
  bq_status st = bq__plan_init(desc, p);
  bq__device_info dev;
  memset(&dev, 0, sizeof dev);
  if (!st) st = bq__plan_context(p->desc.device, &p->ctx, pushed, &dev);
  p->device = dev.ordinal;
  bq__target t;
  if (!st && (st = bq__target_for(&p->desc, dev.sm, &t))) bq__refail(st, p->name);
  if (st) { BQ_FREE(p); return st; }
  p->target = t;
  bq__kernels_of(&p->desc, &t, p->kernels);
  bq__kernel_src k;
  memset(&k, 0, sizeof k);
  bq__sku_of(&p->desc, &t, &k);
  bq__copy(p->sku, sizeof p->sku, k.sku);
  p->num_sms = dev.num_sms;
  p->threads_sm = dev.threads_sm;
  p->l2_bytes = dev.l2_bytes;
  snprintf(p->gpu, sizeof p->gpu, "%s sms %d mem %d", dev.name[0] ? dev.name : "?", dev.num_sms, dev.mem_khz);
  if (p->fam->plan_setup) st = p->fam->plan_setup(p);
  bq_desc q;
  if (!st && p->fam->sub && p->fam->sub(&p->desc, &q)) { /* the plan it holds */
    int sub_pushed = 0; /* (this plan's context is current: the sub-plan's is the same) */
    bq__CUcontext c;
    st = bq__select(&q, &p->sub, &sub_pushed);
    if (sub_pushed) bq__drv.cuCtxPopCurrent(&c);
    if (!st) {
      size_t n = strlen(p->sku);
      snprintf(p->sku + n, sizeof p->sku - n, " + %s", p->sub->sku);
    }
  }
  if (!st) st = bq__plan_prime(p);
  if (st) { /* (the message names the plan: bq__plan_load's, or the sub-plan's select's) */
    bq_plan_destroy(p);
    return st;
  }
  *out = p;
  return BQ_SUCCESS;
}

/* The target comes from NVRTC's archs, read from the memo without loading NVRTC. Where
   that memo proves wrong (found by a compile, or checked here after a failure that a
   wrong arch list could cause), the select runs again on NVRTC's own list. */
BQ__DEF bq_status bq_plan_select(const bq_desc *desc, bq_plan **out) {
  unsigned gen = bq__nvrtc_gen();
  int outer = bq__retarget, pushed = 0;
  bq__retarget = 1;
  bq_status st = bq__select(desc, out, &pushed);
  bq__CUcontext c;
  if (pushed) bq__drv.cuCtxPopCurrent(&c);
  bq__retarget = outer;
  int suspect = st == BQ_ERROR_NOT_SUPPORTED || st == BQ_ERROR_COMPILE_FAILED || st == BQ_ERROR_CUDA;
  if (gen != bq__nvrtc_gen() || (suspect && bq__nvrtc_recheck())) {
    bq_plan_destroy(st ? NULL : *out);
    pushed = 0;
    st = bq__select(desc, out, &pushed);
    if (pushed) bq__drv.cuCtxPopCurrent(&c);
  }
  return st;
}

/* The fields one op owns: args.amax_bound (dynamic quantize's, symmetric, 0 or finite and
   > 0 in C; 0 elsewhere), args.mask (fake quantize's per tensor and per channel; NULL
   elsewhere), args.tensor_scale and out_tensor_scale (NVFP4's; NULL elsewhere), args.seed
   (random signs, stochastic rounding) and args.offset (stochastic rounding; 0 elsewhere) */
BQ__FN bq_status bq__check_op_fields(const bq_plan *p, const bq_args *a) {
  const bq_desc *d = &p->desc;
  const double b = a->amax_bound;
  const unsigned owns = p->fam->owns ? p->fam->owns(d) : 0;
  if (a->mask && !(owns & BQ__OWNS_MASK))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.mask (%p) must be NULL: only fake quantize per tensor and "
                    "per channel keep a mask (rounding to nearest, unrotated)", p->name, a->mask);
  if ((a->tensor_scale || a->out_tensor_scale) && !(owns & BQ__OWNS_TENSOR_SCALE))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.%s (%p) must be NULL: the tensor scale is NVFP4's "
                    "(microscaling, desc.scale_type BQ_E4M3)", p->name,
                    a->tensor_scale ? "tensor_scale" : "out_tensor_scale",
                    a->tensor_scale ? a->tensor_scale : a->out_tensor_scale);
  if (a->seed && !(owns & BQ__OWNS_SEED))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.seed (%llu) must be 0: it keys BQ_HADAMARD's random signs "
                    "(desc.random_signs) and stochastic rounding (desc.rounding)", p->name,
                    (unsigned long long)a->seed);
  if (a->rotation_block && !(owns & BQ__OWNS_ROTATION))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.rotation_block (%lld) must be 0: it is the fused "
                    "rotation's block (desc.rotation)", p->name, (long long)a->rotation_block);
  if (a->offset && !(owns & BQ__OWNS_OFFSET))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.offset (%llu) must be 0: it places stochastic rounding's "
                    "draws (desc.rounding)", p->name, (unsigned long long)a->offset);
  if (b == 0) return BQ_SUCCESS;
  if (!(owns & BQ__OWNS_AMAX_BOUND))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.amax_bound (%g) applies to dynamic quantize only", p->name, b);
  if (d->asymmetric)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.amax_bound (%g) applies to symmetric plans only", p->name, b);
  if (!(isfinite(b) && b > 0) || (d->float_type != BQ_F64 && !((float)b > 0 && isfinite((float)b))))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.amax_bound (%g) must be 0 (none) or finite and > 0 in %s",
                    p->name, b, d->float_type == BQ_F64 ? "f64" : "f32");
  return BQ_SUCCESS;
}

BQ__DEF bq_status bq_plan_can_implement(const bq_plan *p, const bq_args *a) {
  if (!p) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_plan_can_implement: plan is NULL");
  if (a) {
    bq_status st = bq__check_op_fields(p, a);
    if (st) return st;
  }
  return p->fam->check(p, a);
}

/* Validates what the size depends on (the problem's shape, by the family's own rules, the
   first of its check's), not the pointers, which a caller may not have allocated yet. */
BQ__DEF bq_status bq_plan_workspace_size(const bq_plan *p, const bq_args *a, size_t *bytes) {
  if (bytes) *bytes = 0;
  if (!p) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_plan_workspace_size: plan is NULL");
  if (!bytes) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: bq_plan_workspace_size: bytes is NULL", p->name);
  bq_status st = p->fam->shape(p, a);
  if (!st) *bytes = p->fam->workspace(p, a);
  return st;
}

/* A plan runs in its own context: where another is current its modules' handles mean
   nothing (the driver would say "invalid resource handle"), so that is refused by name. */
BQ__FN bq_status bq__context_mismatch(const bq_plan *p, bq__CUcontext cur) {
  int cd = bq__context_device(cur);
  if (cd == p->device)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: plan selected in a context of device %d, current context is "
                    "another context of device %d: make the plan's context current (or none), or select a plan "
                    "in this one", p->name, p->device, cd);
  return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: plan selected on device %d, current context is device %d's: make "
                  "device %d current (bq_set_device) or none, or select a plan for device %d", p->name, p->device,
                  cd, p->device, cd);
}

BQ__DEF bq_status bq_plan_run(const bq_plan *p, const bq_args *a, void *workspace, size_t workspace_bytes,
                              void *stream) {
  if (!p) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_plan_run: plan is NULL");
  if (a) {
    bq_status st = bq__check_op_fields(p, a);
    if (st) return st;
  }
  if (!p->ctx) return p->fam->run(p, a, workspace, workspace_bytes, stream); /* built without a device: validates */
  bq__CUcontext cur = NULL;
  bq__CUresult r = bq__drv.cuCtxGetCurrent(&cur);
  if (r) return bq__cu_fail(r, "cuCtxGetCurrent");
  if (cur == p->ctx) return p->fam->run(p, a, workspace, workspace_bytes, stream);
  if (cur) return bq__context_mismatch(p, cur);
  if ((r = bq__drv.cuCtxPushCurrent(p->ctx))) return bq__cu_fail(r, "cuCtxPushCurrent");
  bq_status st = p->fam->run(p, a, workspace, workspace_bytes, stream);
  bq__drv.cuCtxPopCurrent(&cur);
  return st;
}

BQ__DEF void bq_plan_destroy(bq_plan *p) {
  if (!p) return;
  for (int e = 0; e < BQ__MAX_KERNELS; e++)
    if (p->mod[e]) bq__entry_release(p->mod[e]);
  bq_plan_destroy(p->sub);
  bq_plan_destroy(p->rows);
  pthread_mutex_destroy(&p->lock);
  BQ_FREE(p);
}

BQ__DEF const char *bq_plan_sku(const bq_plan *p) { return p ? p->sku : ""; }

BQ__DEF const char *bq_plan_precision_guarantee(const bq_plan *p) {
  if (!p) return "";
  if (p->fam->guarantee) return p->fam->guarantee(&p->desc);
  if (p->desc.float_type == BQ_F64)
    return "exact: f64 arithmetic throughout (IEEE division and product, round half to even); "
           "bit-identical to the CPU reference of docs/numerics.md";
  return "exact: f32 arithmetic (IEEE division and product, round half to even, no FMA "
         "contraction), RNE to the storage type; bit-identical to the CPU reference of docs/numerics.md";
}
