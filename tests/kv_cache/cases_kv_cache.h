/* The kv_cache family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_KV_CACHE_H
#define TALON_TESTS_CASES_KV_CACHE_H

#define KV_CACHE_TEST_OPS(X) X(kv_append, kv_append)
/* bench/shim.c: the fields of its args structs, in talon.h's order (kinds: bench/shim.c) */
#define KV_CACHE_BENCH_STRUCTS(S, F) \
    S(talon_kv_append_args, \
      F(k_cache, PTR) F(v_cache, PTR) F(k, PTR) F(v, PTR) F(slot_mapping, PTR) \
      F(tokens, I64) F(num_kv_heads, I64) F(head_dim, I64) F(num_pages, I64) \
      F(page_size, I64) F(k_stride, I64) F(v_stride, I64) F(k_scale, F32) F(v_scale, F32) \
      F(dtype, ENUM) F(cache_dtype, ENUM) F(layout, ENUM))

#define KV_CACHE_CHECKED_OPS(X) X(kv_append, talon__kv_params, test_kv_append)

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void kv_append_valid_args(talon_kv_append_args *a) {
    a->k_cache = 1 * GB; a->v_cache = 2 * GB; a->k = 3 * GB;
    a->v = 4 * GB; a->slot_mapping = 5 * GB; a->tokens = 16;
    a->num_kv_heads = 8; a->head_dim = 128;
    a->num_pages = 64; a->page_size = 16;
}
#endif

#ifdef TALON_TESTS_OP_CASES_H /* oc_case's params */
/* strided: k and v as views of one buffer of rows 2 Hk D + pad */
typedef struct { int64_t tokens, hk, d, ps, pad; int fp8, hnd, strided; float k_scale, v_scale; } kv_params;
#define KV_CACHE_OC_PARAMS kv_params kv;
#endif

#endif

#ifdef OC_FAMILY_CASES /* op_cases.h */
/* kv_append: the inputs' layout (elements of the one k/v buffer) and the caches' size */
typedef struct kv_geo {
    int64_t row, num_pages, slots, n, kpos, vpos, ld, stride; /* stride as passed (0: row) */
} kv_geo;
static void kv_geometry(const oc_case *c, kv_geo *g) {
    const int64_t t = c->p.kv.tokens, ps = c->p.kv.ps;
    memset(g, 0, sizeof *g);
    g->row = c->p.kv.hk * c->p.kv.d;
    g->num_pages = (t * 3 / 2 + ps - 1) / ps + 1;
    g->slots = g->num_pages * ps;
    if (c->p.kv.strided) {
        g->ld = g->stride = 2 * g->row + c->p.kv.pad;
        g->vpos = g->row;
        g->n = t * g->ld;
    } else {
        g->ld = g->row;
        g->vpos = oc_round_up(t * g->row, 8);
        g->n = g->vpos + t * g->row;
    }
}

static void kv_random(oc_case *c, uint64_t *s, int big) {
    static const int64_t dims[] = {64, 128, 256, 80, 100, 7, 16, 1, 1024};
    static const float scales[] = {0.0f, 0.5f, 2.0f, 3.0f, 0.1f, 0.75f, 1.0f / 3.0f};
    const int64_t max_elems = big ? 4000000 : 250000;
    c->p.kv.fp8 = oc_chance(s, 30);
    c->p.kv.k_scale = c->p.kv.fp8 ? scales[oc_ri(s, 0, OC_COUNT(scales) - 1)] : 0.0f;
    c->p.kv.v_scale = c->p.kv.fp8 ? scales[oc_ri(s, 0, OC_COUNT(scales) - 1)] : 0.0f;
    c->p.kv.hk = oc_len(s, 1, 8);
    c->p.kv.d = dims[oc_ri(s, 0, OC_COUNT(dims) - (big ? 1 : 2))];
    c->p.kv.tokens = oc_len(s, 1, big ? 4096 : 256);
    while (c->p.kv.tokens > 1 && c->p.kv.tokens * c->p.kv.hk * c->p.kv.d * 4 > max_elems)
        c->p.kv.tokens = (c->p.kv.tokens + 1) / 2;
    c->p.kv.ps = (int64_t)1 << oc_ri(s, 0, 8);
    c->p.kv.hnd = oc_chance(s, 50);
    c->p.kv.strided = oc_chance(s, 40);
    c->p.kv.pad = oc_chance(s, 50) ? 0 : oc_chance(s, 50) ? 8 : 3;
}

static int kv_describe(const oc_case *c, char *buf, size_t n, const char *name,
                       const char *dt, unsigned long long seed) {
    return snprintf(buf, n, "%s %s -> %s %s tokens %lld Hk %lld D %lld page %lld %s pad %lld "
                    "scales %g %g seed %llx", name, dt, c->p.kv.fp8 ? "e4m3" : dt,
                    c->p.kv.hnd ? "HND" : "NHD", (long long)c->p.kv.tokens,
                    (long long)c->p.kv.hk, (long long)c->p.kv.d, (long long)c->p.kv.ps,
                    c->p.kv.strided ? "strided" : "contiguous", (long long)c->p.kv.pad,
                    (double)c->p.kv.k_scale, (double)c->p.kv.v_scale, seed);
}

static int kv_build(oc_job *j, talon_ctx *ctx) {
    const oc_case *c = &j->c;
    const int es = c->p.kv.fp8 ? 1 : 2;
    const int64_t t = c->p.kv.tokens;
    kv_geo g;
    int64_t *perm, i;
    uint64_t s = c->seed;
    (void)ctx;
    kv_geometry(c, &g);
    if (oc_add(j, "k and v", OC_IN, 2, g.n, 0) != 0 ||
        oc_add(j, "slot_mapping", OC_IN, 8, t, 0) != 1 ||
        oc_add(j, "k_cache", OC_INOUT, es, g.slots * g.row, 0) != 2 || /* starts poisoned */
        oc_add(j, "v_cache", OC_INOUT, es, g.slots * g.row, 0) != 3)
        return -1;
    /* fp8: values past 448 too (saturation) */
    oc_fill16(j, 0, 0, g.n, c->p.kv.fp8 ? 600.0f : 4.0f, &s);
    if (!(perm = (int64_t *)malloc((size_t)g.slots * sizeof(int64_t)))) return -1;
    for (i = 0; i < g.slots; i++) perm[i] = i;
    for (i = g.slots - 1; i > 0; i--) {
        const int64_t k = (int64_t)(ref_next64(&s) % (uint64_t)(i + 1)), x = perm[i];
        perm[i] = perm[k];
        perm[k] = x;
    }
    for (i = 0; i < t; i++) { /* distinct slots (equal ones race); 1 in 8 negative, 1 in 16
                                 past the end (token 0 always lands) */
        const uint64_t r = i ? ref_next64(&s) % 16 : 15;
        oc_setl(oc_img(j, 1), i, r < 2 ? -1 - (int64_t)r * 1000 : r == 2 ? g.slots + i : perm[i]);
    }
    free(perm);
    return 0;
}

static void kv_args(const oc_job *j, const oc_dev *d, op_args *a) {
    const oc_case *c = &j->c;
    kv_geo g;
    kv_geometry(c, &g);
    a->kv_append.k_cache = P(2); a->kv_append.v_cache = P(3);
    a->kv_append.k = P(0) + (CUdeviceptr)(2 * g.kpos);
    a->kv_append.v = P(0) + (CUdeviceptr)(2 * g.vpos);
    a->kv_append.slot_mapping = P(1);
    a->kv_append.tokens = c->p.kv.tokens; a->kv_append.num_kv_heads = c->p.kv.hk;
    a->kv_append.head_dim = c->p.kv.d; a->kv_append.num_pages = g.num_pages;
    a->kv_append.page_size = c->p.kv.ps;
    a->kv_append.k_stride = g.stride; a->kv_append.v_stride = g.stride;
    a->kv_append.k_scale = c->p.kv.k_scale; a->kv_append.v_scale = c->p.kv.v_scale;
    a->kv_append.dtype = c->dt;
    a->kv_append.cache_dtype = c->p.kv.fp8 ? TALON_DTYPE_FP8_E4M3 : c->dt;
    a->kv_append.layout = c->p.kv.hnd ? TALON_KV_HND : TALON_KV_NHD;
}

static void kv_check(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget) {
    const oc_case *c = &j->c;
    const int es = c->p.kv.fp8 ? 1 : 2;
    kv_geo g;
    uint8_t *want[2];
    int64_t t, e, i;
    int kv;
    (void)budget;
    kv_geometry(c, &g);
    want[0] = (uint8_t *)malloc(j->b[2].used * 2);
    if (!want[0]) { oc_fail(st, "out of host memory"); return; }
    want[1] = want[0] + j->b[2].used;
    memcpy(want[0], j->b[2].init, j->b[2].used);
    memcpy(want[1], j->b[3].init, j->b[3].used);
    for (t = 0; t < c->p.kv.tokens; t++) {
        const int64_t slot = oc_getl(oc_img(j, 1), t), pg = slot / c->p.kv.ps, off = slot % c->p.kv.ps;
        if (slot < 0 || slot >= g.slots) continue; /* skipped */
        for (kv = 0; kv < 2; kv++) {
            const float sc = kv ? c->p.kv.v_scale : c->p.kv.k_scale, scale = sc ? sc : 1.0f;
            for (e = 0; e < g.row; e++) {
                const uint16_t b = oc_get16(oc_img(j, 0), (kv ? g.vpos : g.kpos) + t * g.ld + e);
                const int64_t h = e / c->p.kv.d;
                const int64_t at = c->p.kv.hnd ? ((pg * c->p.kv.hk + h) * c->p.kv.ps + off) * c->p.kv.d + e % c->p.kv.d
                                               : slot * g.row + e;
                if (es == 1) want[kv][at] = ref_e4m3_from_f32(REF_TO_F32(c->dt, b) / scale);
                else oc_set16(want[kv], at, b);
            }
        }
    }
    for (kv = 0; kv < 2; kv++) {
        st->elements += (int64_t)j->b[2 + kv].used / es;
        for (i = 0; i < (int64_t)j->b[2 + kv].used; i++)
            if (img[2 + kv][i] != want[kv][i]) {
                oc_fail(st, "%s byte %lld = 0x%02x, expected 0x%02x (slot %lld of %lld-element rows)",
                        kv ? "v_cache" : "k_cache", (long long)i, img[2 + kv][i], want[kv][i],
                        (long long)(i / es / g.row), (long long)g.row);
                break;
            }
    }
    free(want[0]);
}

static const oc_op kv_append_oc = {kv_random, kv_build, kv_args, kv_check, kv_describe, NULL};
#endif

#ifdef CHECKED_FAMILY_CASES /* test_gpu_checked.c */
#ifndef CHECKED_BASELINE
static int kv_case(const char *name, int64_t hk, int64_t d, talon_dtype cache_dtype,
                   int64_t bad_t, int64_t bad_slot) {
    enum { T = 37, PS = 16, PAGES = 8 };
    const int64_t row = hk * d, slots = PS * PAGES, cbytes = cache_dtype == TALON_DTYPE_FP8_E4M3 ? 1 : 2;
    int64_t *slot = (int64_t *)malloc(T * 8);
    uint16_t *k = random_16(TALON_DTYPE_BF16, (size_t)(T * row), 11, 2.0f);
    uint16_t *v = random_16(TALON_DTYPE_BF16, (size_t)(T * row), 12, 2.0f);
    region rg[2];
    CUdeviceptr dk = gpu_alloc((size_t)(T * row * 2)), dv = gpu_alloc((size_t)(T * row * 2));
    CUdeviceptr ds_ok = gpu_alloc(T * 8), ds_bad = gpu_alloc(T * 8);
    talon_kv_append_args a, b;
    want_report w = {NULL, NULL, 0, 0, 0, NULL};
    int64_t t;
    int fails;
    for (t = 0; t < T; t++) slot[t] = (int64_t)((t * 37 + 5) % slots); /* distinct */
    slot[5] = -1; /* padding: skipped, never a violation */
    upload(dk, k, (size_t)(T * row * 2));
    upload(dv, v, (size_t)(T * row * 2));
    upload(ds_ok, slot, T * 8);
    if (bad_t >= 0) slot[bad_t] = bad_slot;
    upload(ds_bad, slot, T * 8);
    rg[0] = region_new((size_t)(slots * row * cbytes), GUARD, NULL);
    rg[1] = region_new((size_t)(slots * row * cbytes), GUARD, NULL);
    memset(&a, 0, sizeof a);
    a.k_cache = rg[0].p; a.v_cache = rg[1].p; a.k = dk; a.v = dv; a.slot_mapping = ds_bad;
    a.tokens = T; a.num_kv_heads = hk; a.head_dim = d; a.num_pages = PAGES; a.page_size = PS;
    a.cache_dtype = cache_dtype;
    if (cache_dtype == TALON_DTYPE_FP8_E4M3) a.k_scale = a.v_scale = 0.5f;
    b = a; /* skipping a bad slot is documented without checking: the same inputs */
    if (bad_t >= 0) {
        w.op = "talon_kv_append"; w.what = "slot_mapping";
        w.index = bad_t; w.value = bad_slot; w.bound = slots;
    }
    fails = run_pair(name, rg, 2, OP_kv_append, &b, &a, &w, NULL, NULL);
    region_free(&rg[0]); region_free(&rg[1]);
    cu.cuMemFree(dk); cu.cuMemFree(dv); cu.cuMemFree(ds_ok); cu.cuMemFree(ds_bad);
    free(slot); free(k); free(v);
    return fails;
}

static void test_kv_append(void **state) {
    int fails = 0;
    (void)state;
    fails += kv_case("kv_append valid (a -1 padding slot)", 4, 128, TALON_DTYPE_BF16, -1, 0);
    fails += kv_case("kv_append slot = num_slots (v8)", 4, 128, TALON_DTYPE_BF16, 13, 128);
    fails += kv_case("kv_append slot 2^40 (element-wise)", 1, 100, TALON_DTYPE_BF16, 36, 1LL << 40);
    fails += kv_case("kv_append slot INT64_MAX (fp8 cache)", 4, 128, TALON_DTYPE_FP8_E4M3, 0, INT64_MAX);
    if (fails) fail_msg("%d kv_append failures", fails);
}
#endif

/* kv_append: 4096 tokens into a cache of 8192 slots */
static int kv_append_bench(bench_case *cases) {
    enum { TOK = 4096, HK = 8, D = 128, PS = 16 };
    static talon_kv_append_args kv;
    int64_t t;
    int nc = 0;
    int64_t *slot = (int64_t *)malloc(TOK * 8);
    CUdeviceptr ds = gpu_alloc(TOK * 8);
    for (t = 0; t < TOK; t++) slot[t] = (t * 5) % 8192;
    upload(ds, slot, TOK * 8);
    free(slot);
    memset(&kv, 0, sizeof kv);
    kv.k_cache = gpu_alloc((size_t)8192 * HK * D * 2); kv.v_cache = gpu_alloc((size_t)8192 * HK * D * 2);
    kv.k = bench_fill((size_t)TOK * HK * D * 2, 1); kv.v = bench_fill((size_t)TOK * HK * D * 2, 2);
    kv.slot_mapping = ds; kv.tokens = TOK; kv.num_kv_heads = HK; kv.head_dim = D;
    kv.num_pages = 8192 / PS; kv.page_size = PS;
    cases[nc].name = "kv_append 4096 tok, 8 x 128, bf16"; cases[nc].op = OP_kv_append; cases[nc++].args = &kv;
    return nc;
}
#endif
