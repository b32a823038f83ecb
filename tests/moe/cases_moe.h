/* The moe family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_MOE_H
#define TALON_TESTS_CASES_MOE_H

#define MOE_TEST_OPS(X) X(moe_align_block_size, align) X(moe_sum, moe_sum)
/* bench/shim.c: the fields of its args structs, in talon.h's order (kinds: bench/shim.c) */
#define MOE_BENCH_STRUCTS(S, F) \
    S(talon_moe_align_block_size_args, \
      F(sorted_token_ids, PTR) F(expert_ids, PTR) F(num_tokens_post_padded, PTR) \
      F(topk_ids, PTR) F(tokens, I64) F(k, I64) F(experts, I64) F(block_size, I64) \
      F(sorted_capacity, I64) F(expert_ids_capacity, I64)) \
    S(talon_moe_sum_args, \
      F(out, PTR) F(in, PTR) F(weights, PTR) F(tokens, I64) F(k, I64) F(hidden, I64) \
      F(dtype, ENUM))

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void moe_align_block_size_valid_args(talon_moe_align_block_size_args *a) {
    a->sorted_token_ids = 1 * GB; a->expert_ids = 2 * GB;
    a->num_tokens_post_padded = 3 * GB; a->topk_ids = 4 * GB;
    a->tokens = 16; a->k = 8; a->experts = 128; a->block_size = 128;
    talon_moe_align_block_size_capacity(16, 8, 128, 128, &a->sorted_capacity,
                                        &a->expert_ids_capacity);
}

static void moe_sum_valid_args(talon_moe_sum_args *a) {
    a->out = 1 * GB; a->in = 2 * GB; a->weights = 3 * GB;
    a->tokens = 16; a->k = 8; a->hidden = 4096;
}
#endif

#ifdef TALON_TESTS_OP_CASES_H /* oc_case's params */
typedef struct { int64_t tokens, k, experts, block, extra; int dist; } align_params;
typedef struct { int64_t tokens, k, hidden, off; int weighted; } sum_params;
#define MOE_OC_PARAMS align_params align; sum_params sum;
#endif

#endif

#ifdef OC_FAMILY_CASES /* op_cases.h */
#include "ref_moe.h"

static void align_caps(const oc_case *c, int64_t *scap, int64_t *ecap) {
    *scap = *ecap = 0;
    talon_moe_align_block_size_capacity(c->p.align.tokens, c->p.align.k, c->p.align.experts,
                                        c->p.align.block, scap, ecap);
    *scap += c->p.align.extra;
    *ecap += c->p.align.extra;
}

static void align_random(oc_case *c, uint64_t *s, int big) {
    static const int64_t common[] = {8, 64, 128, 256, 512};
    const int64_t max_ids = big ? 300000 : 30000;
    c->p.align.tokens = oc_len(s, 1, big ? 16384 : 1024);
    c->p.align.k = oc_chance(s, 60) ? oc_ri(s, 1, 8) : oc_len(s, 1, 64);
    while (c->p.align.tokens > 1 && c->p.align.tokens * c->p.align.k > max_ids)
        c->p.align.tokens = (c->p.align.tokens + 1) / 2;
    c->p.align.experts = oc_chance(s, 50) ? oc_ri(s, 1, 512) : common[oc_ri(s, 0, OC_COUNT(common) - 1)];
    c->p.align.block = (int64_t)1 << oc_ri(s, 0, big ? 10 : 8);
    c->p.align.extra = oc_chance(s, 20) ? oc_ri(s, 1, 300) : 0;
    c->p.align.dist = oc_chance(s, 60) ? 0 : oc_chance(s, 60) ? 1 : 2;
}

static int align_describe(const oc_case *c, char *buf, size_t n, const char *name,
                          const char *dt, unsigned long long seed) {
    (void)dt; /* ids: no data type */
    return snprintf(buf, n, "%s tokens %lld k %lld experts %lld block %lld extra %lld dist %d "
                    "seed %llx", name, (long long)c->p.align.tokens, (long long)c->p.align.k,
                    (long long)c->p.align.experts, (long long)c->p.align.block,
                    (long long)c->p.align.extra, c->p.align.dist, seed);
}

static int align_build(oc_job *j, talon_ctx *ctx) {
    static const int32_t bad[] = {-1, -1, -2, 0, 1, INT32_MAX, INT32_MIN, -1000};
    const oc_case *c = &j->c;
    const int64_t n = c->p.align.tokens * c->p.align.k, e = c->p.align.experts;
    int64_t scap, ecap, i;
    uint64_t s = c->seed;
    (void)ctx;
    align_caps(c, &scap, &ecap);
    if (oc_add(j, "topk_ids", OC_IN, 4, n, 0) != 0 ||
        oc_add(j, "sorted_token_ids", OC_OUT, 4, scap, 0) != 1 ||
        oc_add(j, "expert_ids", OC_OUT, 4, ecap, 0) != 2 ||
        oc_add(j, "num_tokens_post_padded", OC_OUT, 4, 1, 0) != 3)
        return -1;
    for (i = 0; i < n; i++) {
        const uint64_t r = ref_next64(&s);
        int32_t id = (int32_t)((r >> 8) % (uint64_t)e);
        if (c->p.align.dist == 0 && r % 10 == 0) { /* ~10% ids outside [0, experts): skipped */
            const int32_t b = bad[(r >> 40) % 8];
            id = b == 0 ? (int32_t)e : b == 1 ? (int32_t)e + 7 : b;
        } else if (c->p.align.dist == 2 && r % 10) {
            id = (int32_t)(3 % e); /* 90% on one expert */
        }
        oc_seti(oc_img(j, 0), i, id);
    }
    return 0;
}

static void align_args(const oc_job *j, const oc_dev *d, op_args *a) {
    const oc_case *c = &j->c;
    int64_t scap, ecap;
    align_caps(c, &scap, &ecap);
    a->align.sorted_token_ids = P(1); a->align.expert_ids = P(2);
    a->align.num_tokens_post_padded = P(3); a->align.topk_ids = P(0);
    a->align.tokens = c->p.align.tokens; a->align.k = c->p.align.k;
    a->align.experts = c->p.align.experts; a->align.block_size = c->p.align.block;
    a->align.sorted_capacity = scap; a->align.expert_ids_capacity = ecap;
}

static void align_check(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget) {
    const oc_case *c = &j->c;
    int64_t scap, ecap, i;
    int32_t *sorted, *eids, npost = -1;
    (void)budget;
    align_caps(c, &scap, &ecap);
    sorted = (int32_t *)malloc((size_t)(scap + ecap) * sizeof(int32_t));
    eids = sorted + scap;
    if (!sorted || ref_moe_align((const int32_t *)oc_img(j, 0), c->p.align.tokens, c->p.align.k,
                                 c->p.align.experts, c->p.align.block, sorted, scap, eids, ecap,
                                 &npost)) {
        oc_fail(st, "moe_align reference failed");
        free(sorted);
        return;
    }
    /* talon's order inside each expert's group is ascending (deterministic), so every
       element is compared exactly */
    st->elements += 1 + scap + ecap;
    if (oc_geti(img[3], 0) != npost)
        oc_fail(st, "num_tokens_post_padded = %d, reference %d", oc_geti(img[3], 0), npost);
    for (i = 0; i < scap; i++)
        if (oc_geti(img[1], i) != sorted[i]) {
            oc_fail(st, "sorted_token_ids[%lld] = %d, reference %d", (long long)i, oc_geti(img[1], i), sorted[i]);
            break;
        }
    for (i = 0; i < ecap; i++)
        if (oc_geti(img[2], i) != eids[i]) {
            oc_fail(st, "expert_ids[%lld] = %d, reference %d", (long long)i, oc_geti(img[2], i), eids[i]);
            break;
        }
    free(sorted);
}

static void sum_random(oc_case *c, uint64_t *s, int big) {
    const int64_t max_elems = big ? 8000000 : 400000;
    c->p.sum.tokens = oc_len(s, 1, big ? 1024 : 128);
    c->p.sum.k = oc_chance(s, 70) ? oc_ri(s, 1, 9) : oc_len(s, 1, 64);
    c->p.sum.hidden = oc_chance(s, 50) ? 8 * oc_len(s, 1, 1024) : oc_len(s, 1, 6000);
    while (c->p.sum.tokens > 1 && c->p.sum.tokens * c->p.sum.k * c->p.sum.hidden > max_elems)
        c->p.sum.tokens = (c->p.sum.tokens + 1) / 2;
    c->p.sum.off = oc_chance(s, 20);
    c->p.sum.weighted = oc_chance(s, 60);
}

static int sum_describe(const oc_case *c, char *buf, size_t n, const char *name,
                        const char *dt, unsigned long long seed) {
    return snprintf(buf, n, "%s %s tokens %lld k %lld hidden %lld offset %lld %s seed %llx",
                    name, dt, (long long)c->p.sum.tokens, (long long)c->p.sum.k,
                    (long long)c->p.sum.hidden, (long long)c->p.sum.off,
                    c->p.sum.weighted ? "weighted" : "plain", seed);
}

static int sum_build(oc_job *j, talon_ctx *ctx) {
    const oc_case *c = &j->c;
    const int64_t t = c->p.sum.tokens, k = c->p.sum.k, h = c->p.sum.hidden, off = c->p.sum.off;
    uint64_t s = c->seed;
    int64_t i;
    (void)ctx;
    if (oc_add(j, "in", OC_IN, 2, t * k * h, off) != 0 ||
        oc_add(j, "weights", OC_IN, 4, t * k, 0) != 1 ||
        oc_add(j, "out", OC_OUT, 2, t * h, off) != 2)
        return -1;
    oc_fill16(j, 0, 0, t * k * h, 1.0f, &s);
    for (i = 0; i < t * k; i++) oc_setf(oc_img(j, 1), i, ref_unit01(&s));
    return 0;
}

static void sum_args(const oc_job *j, const oc_dev *d, op_args *a) {
    const oc_case *c = &j->c;
    a->moe_sum.out = P(2); a->moe_sum.in = P(0); a->moe_sum.weights = c->p.sum.weighted ? P(1) : 0;
    a->moe_sum.tokens = c->p.sum.tokens; a->moe_sum.k = c->p.sum.k;
    a->moe_sum.hidden = c->p.sum.hidden; a->moe_sum.dtype = c->dt;
}

static void sum_check(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget) {
    const oc_case *c = &j->c;
    const int64_t t = c->p.sum.tokens, k = c->p.sum.k, h = c->p.sum.hidden;
    const double rtol = ref_rtol(c->dt), atol = ref_atol(c->dt);
    double *x = (double *)malloc((size_t)(t * k * h + t * k + 2 * t * h) * sizeof(double));
    double *w = x + t * k * h, *ref = w + t * k, *mag = ref + t * h;
    int64_t i;
    (void)budget;
    if (!x) { oc_fail(st, "out of host memory"); return; }
    for (i = 0; i < t * k * h; i++) x[i] = REF_TO_F32(c->dt, oc_get16(oc_img(j, 0), i));
    for (i = 0; i < t * k; i++) w[i] = oc_getf(oc_img(j, 1), i);
    ref_moe_sum(x, c->p.sum.weighted ? w : NULL, ref, mag, t, k, h);
    for (i = 0; i < t * h; i++)
        oc_cmp(st, "out", i / h, i % h, REF_TO_F32(c->dt, oc_get16(img[2] + j->b[2].off, i)), ref[i],
               atol + rtol * fabs(ref[i]) + 0x1p-18 * mag[i]);
    oc_check_outside(st, j, 2, img[2], t, h, h);
    free(x);
}

static const oc_op moe_align_block_size_oc = {align_random, align_build, align_args,
                                              align_check, align_describe, NULL};
static const oc_op moe_sum_oc = {sum_random, sum_build, sum_args, sum_check, sum_describe, NULL};
#endif
