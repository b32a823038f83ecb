/* The router family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_ROUTER_H
#define TALON_TESTS_CASES_ROUTER_H

#define ROUTER_TEST_OPS(X) X(moe_router_topk, router)
/* bench/shim.c: the fields of its args structs, in talon.h's order (kinds: bench/shim.c) */
#define ROUTER_BENCH_STRUCTS(S, F) \
    S(talon_moe_router_topk_args, \
      F(topk_weights, PTR) F(topk_ids, PTR) F(logits, PTR) F(correction_bias, PTR) \
      F(tokens, I64) F(experts, I64) F(k, I64) F(logits_stride, I64) F(logits_dtype, ENUM) \
      F(scoring, ENUM) F(renormalize, I32))

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void moe_router_topk_valid_args(talon_moe_router_topk_args *a) {
    a->topk_weights = 1 * GB; a->topk_ids = 2 * GB; a->logits = 3 * GB;
    a->tokens = 16; a->experts = 128; a->k = 8;
}
#endif

#ifdef TALON_TESTS_OP_CASES_H /* oc_case's params */
typedef struct { int64_t tokens, experts, k, stride; int scoring, renorm, bias; } router_params;
#define ROUTER_OC_PARAMS router_params router;
#endif

#endif

#ifdef OC_FAMILY_CASES /* op_cases.h */
#include "ref_router.h"

static void router_random(oc_case *c, uint64_t *s, int big) {
    static const int64_t common[] = {8, 16, 60, 64, 128, 160, 256, 384, 512};
    const int r = (int)oc_ri(s, 0, 2);
    c->dt = r == 0 ? TALON_DTYPE_F32 : r == 1 ? TALON_DTYPE_BF16 : TALON_DTYPE_F16;
    c->p.router.tokens = oc_len(s, 1, big ? 4096 : 256);
    c->p.router.experts = oc_chance(s, 50) ? common[oc_ri(s, 0, OC_COUNT(common) - 1)] : oc_ri(s, 1, 512);
    c->p.router.k = oc_ri(s, 1, c->p.router.experts < 16 ? c->p.router.experts : 16);
    if (oc_chance(s, 25))
        c->p.router.stride = c->p.router.experts +
                             (oc_chance(s, 50) ? (c->dt == TALON_DTYPE_F32 ? 4 : 8) : 3);
    c->p.router.scoring = oc_chance(s, 50);
    c->p.router.renorm = oc_chance(s, 50);
    c->p.router.bias = oc_chance(s, 50);
}

static int router_describe(const oc_case *c, char *buf, size_t n, const char *name,
                           const char *dt, unsigned long long seed) {
    return snprintf(buf, n, "%s %s tokens %lld experts %lld k %lld stride %lld %s%s%s seed %llx",
                    name, dt, (long long)c->p.router.tokens, (long long)c->p.router.experts,
                    (long long)c->p.router.k, (long long)c->p.router.stride,
                    c->p.router.scoring ? "sigmoid" : "softmax", c->p.router.bias ? " bias" : "",
                    c->p.router.renorm ? " renormalised" : "", seed);
}

static int router_build(oc_job *j, talon_ctx *ctx) {
    const oc_case *c = &j->c;
    const int esize = c->dt == TALON_DTYPE_F32 ? 4 : 2;
    const int64_t t = c->p.router.tokens, e = c->p.router.experts, k = c->p.router.k;
    const int64_t ld = c->p.router.stride ? c->p.router.stride : e;
    uint64_t s = c->seed;
    int64_t r, x;
    (void)ctx;
    if (oc_add(j, "logits", OC_IN, esize, (t - 1) * ld + e, 0) != 0 ||
        oc_add(j, "correction_bias", OC_IN, 4, e, 0) != 1 ||
        oc_add(j, "topk_weights", OC_OUT, 4, t * k, 0) != 2 ||
        oc_add(j, "topk_ids", OC_OUT, 4, t * k, 0) != 3)
        return -1;
    for (r = 0; r < t; r++) /* row padding stays NaN: it would rank first if read */
        for (x = 0; x < e; x++) {
            const float v = 4.0f * oc_u(&s);
            if (esize == 4) oc_setf(oc_img(j, 0), r * ld + x, v);
            else oc_set16(oc_img(j, 0), r * ld + x, oc_bits(c->dt, v));
        }
    for (x = 0; x < e; x++) oc_setf(oc_img(j, 1), x, 0.1f * oc_u(&s));
    return 0;
}

static void router_args(const oc_job *j, const oc_dev *d, op_args *a) {
    const oc_case *c = &j->c;
    a->router.topk_weights = P(2); a->router.topk_ids = P(3); a->router.logits = P(0);
    a->router.correction_bias = c->p.router.bias ? P(1) : 0;
    a->router.tokens = c->p.router.tokens; a->router.experts = c->p.router.experts;
    a->router.k = c->p.router.k; a->router.logits_stride = c->p.router.stride;
    a->router.logits_dtype = c->dt;
    a->router.scoring = c->p.router.scoring ? TALON_ROUTER_SIGMOID : TALON_ROUTER_SOFTMAX;
    a->router.renormalize = c->p.router.renorm;
}

static void router_check(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget) {
    const oc_case *c = &j->c;
    const int64_t t = c->p.router.tokens, e = c->p.router.experts, k = c->p.router.k;
    const int64_t ld = c->p.router.stride ? c->p.router.stride : e;
    float *x = (float *)malloc((size_t)(t * e + e) * sizeof(float)), *bias = x + t * e;
    double *rw = (double *)malloc((size_t)(t * k) * sizeof(double));
    int32_t *rid = (int32_t *)malloc((size_t)(t * k) * sizeof(int32_t));
    int64_t r, i;
    (void)budget;
    if (!x || !rw || !rid) { oc_fail(st, "out of host memory"); goto done; }
    for (r = 0; r < t; r++)
        for (i = 0; i < e; i++)
            x[r * e + i] = c->dt == TALON_DTYPE_F32 ? oc_getf(oc_img(j, 0), r * ld + i)
                                                    : REF_TO_F32(c->dt, oc_get16(oc_img(j, 0), r * ld + i));
    for (i = 0; i < e; i++) bias[i] = oc_getf(oc_img(j, 1), i);
    ref_moe_router_topk(x, c->p.router.bias ? bias : NULL, t, (int)e, (int)k, c->p.router.scoring,
                        c->p.router.renorm, rw, rid);
    for (i = 0; i < t * k; i++) {
        const int32_t id = oc_geti(img[3], i);
        const double w = oc_getf(img[2], i);
        st->elements++;
        if (id != rid[i])
            oc_fail(st, "topk_ids[%lld, %lld] = %d, reference %d (exact)", (long long)(i / k),
                    (long long)(i % k), id, rid[i]);
        if (isnan(rw[i]) || isnan(w)) {
            st->elements++;
            if (!(isnan(rw[i]) && isnan(w)))
                oc_fail(st, "topk_weights[%lld, %lld] = %g, reference %g", (long long)(i / k),
                        (long long)(i % k), w, rw[i]);
        } else { /* 32 fp32 ulp: the hardware exp and fp32 sums */
            oc_cmp(st, "topk_weights", i / k, i % k, w, rw[i], 0x1p-19 * fabs(rw[i]) + 0x1p-30);
        }
    }
done:
    free(x); free(rw); free(rid);
}

static const oc_op moe_router_topk_oc = {router_random, router_build, router_args,
                                         router_check, router_describe, NULL};
#endif
