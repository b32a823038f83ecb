/* The rope family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_ROPE_H
#define TALON_TESTS_CASES_ROPE_H

#define ROPE_TEST_OPS(X) X(rope, rope)
/* bench/shim.c: the fields of its args structs, in talon.h's order (kinds: bench/shim.c) */
#define ROPE_BENCH_STRUCTS(S, F) \
    S(talon_rope_args, \
      F(q, PTR) F(k, PTR) F(positions, PTR) F(cos_sin_cache, PTR) F(tokens, I64) \
      F(num_q_heads, I64) F(num_kv_heads, I64) F(head_dim, I64) F(rot_dim, I64) \
      F(q_stride, I64) F(k_stride, I64) F(max_pos, I64) F(theta, F32) F(dtype, ENUM) \
      F(positions_dtype, ENUM) F(style, ENUM))

#define ROPE_CHECKED_OPS(X) X(rope, talon__rope_params, test_rope)

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void rope_valid_args(talon_rope_args *a) {
    a->q = 1 * GB; a->k = 2 * GB; a->positions = 3 * GB; a->tokens = 16;
    a->num_q_heads = 32; a->num_kv_heads = 8; a->head_dim = 128;
}
#endif

#ifdef TALON_TESTS_OP_CASES_H /* oc_case's params */
/* layout 0: q and k separate, contiguous; 1: one fused qkv buffer (rows padded by 8);
   2: fused, misaligned by one element, rows padded by 3. max_pos 0: theta mode */
typedef struct {
    int64_t tokens, hq, hk, d, rot, max_pos, pos_lo, pos_hi;
    int gptj, pos64, layout;
    float theta;
} rope_params;
#define ROPE_OC_PARAMS rope_params rope;
#endif

#endif

#ifdef OC_FAMILY_CASES /* op_cases.h */
#include "ref_rope.h"

/* rope: where q, k (and v) live in the one qkv buffer (elements) */
typedef struct rope_geo {
    int64_t n, q, k, row_q, row_k, q_stride, k_stride; /* strides as passed (0: contiguous) */
} rope_geo;
static void rope_geometry(const oc_case *c, rope_geo *g) {
    const int64_t t = c->p.rope.tokens, hq = c->p.rope.hq, hk = c->p.rope.hk, d = c->p.rope.d;
    memset(g, 0, sizeof *g);
    if (c->p.rope.layout == 0) {
        g->k = oc_round_up(t * hq * d, 8);
        g->n = g->k + t * hk * d;
        g->row_q = hq * d;
        g->row_k = hk * d;
    } else {
        const int64_t row = (hq + 2 * hk) * d + (c->p.rope.layout == 1 ? 8 : 3);
        g->q = c->p.rope.layout == 2;
        g->k = g->q + hq * d;
        g->n = g->q + t * row;
        g->row_q = g->row_k = g->q_stride = g->k_stride = row;
    }
}

static void rope_random(oc_case *c, uint64_t *s, int big) {
    static const int64_t dims[] = {64, 128, 256, 80, 72, 66, 6, 32, 96, 2, 128, 1024};
    const int64_t max_elems = big ? 6000000 : 300000;
    int64_t per_token;
    c->p.rope.d = dims[oc_ri(s, 0, OC_COUNT(dims) - (big ? 1 : 2))];
    c->p.rope.rot = oc_chance(s, 60) ? 0 : 2 * oc_ri(s, 1, c->p.rope.d / 2);
    c->p.rope.hq = oc_len(s, 1, 32);
    c->p.rope.hk = oc_chance(s, 10) ? 0 : oc_len(s, 1, c->p.rope.hq < 8 ? c->p.rope.hq : 8);
    per_token = (c->p.rope.hq + 2 * c->p.rope.hk) * c->p.rope.d;
    c->p.rope.tokens = oc_len(s, 1, big ? 2048 : 256);
    while (c->p.rope.tokens > 1 && c->p.rope.tokens * per_token > max_elems)
        c->p.rope.tokens = (c->p.rope.tokens + 1) / 2;
    c->p.rope.layout = (int)oc_ri(s, 0, 2);
    c->p.rope.gptj = oc_chance(s, 50);
    c->p.rope.pos64 = oc_chance(s, 50);
    if (oc_chance(s, 50)) { /* theta: the angle in fp64, any position */
        static const float thetas[] = {0.0f, 10000.0f, 500000.0f, 1e6f};
        c->p.rope.theta = thetas[oc_ri(s, 0, 3)];
        if (oc_chance(s, 70)) { c->p.rope.pos_lo = 0; c->p.rope.pos_hi = 65536; }
        else if (!c->p.rope.pos64 || oc_chance(s, 50)) {
            c->p.rope.pos_lo = -2147483647;
            c->p.rope.pos_hi = 2147483647;
        }
        else { c->p.rope.pos_lo = -3000000000LL; c->p.rope.pos_hi = 3000000000LL; }
    } else { /* a cos/sin cache; some positions outside it (tokens left unchanged) */
        c->p.rope.max_pos = oc_len(s, 16, 4096);
        c->p.rope.pos_lo = -1 - c->p.rope.max_pos / 8;
        c->p.rope.pos_hi = c->p.rope.max_pos + 1 + c->p.rope.max_pos / 8;
    }
}

static int rope_describe(const oc_case *c, char *buf, size_t n, const char *name,
                         const char *dt, unsigned long long seed) {
    return snprintf(buf, n, "%s %s tokens %lld Hq %lld Hk %lld D %lld rot %lld %s layout %d "
                    "%s positions [%lld, %lld) %s (theta %g, max_pos %lld) seed %llx", name,
                    dt, (long long)c->p.rope.tokens, (long long)c->p.rope.hq,
                    (long long)c->p.rope.hk, (long long)c->p.rope.d, (long long)c->p.rope.rot,
                    c->p.rope.gptj ? "GPT-J" : "NeoX", c->p.rope.layout,
                    c->p.rope.pos64 ? "int64" : "int32", (long long)c->p.rope.pos_lo,
                    (long long)c->p.rope.pos_hi, c->p.rope.max_pos ? "cache" : "theta",
                    (double)c->p.rope.theta, (long long)c->p.rope.max_pos, seed);
}

static int rope_build(oc_job *j, talon_ctx *ctx) {
    const oc_case *c = &j->c;
    const int64_t t = c->p.rope.tokens, rot = c->p.rope.rot ? c->p.rope.rot : c->p.rope.d;
    const int64_t max_pos = c->p.rope.max_pos;
    rope_geo g;
    uint64_t s = c->seed;
    int64_t i, p;
    (void)ctx;
    rope_geometry(c, &g);
    if (oc_add(j, "qkv", OC_INOUT, 2, g.n, 0) != 0 ||
        oc_add(j, "positions", OC_IN, c->p.rope.pos64 ? 8 : 4, t, 0) != 1 ||
        oc_add(j, "cos_sin_cache", OC_IN, 4, max_pos ? max_pos * rot : 1, 0) != 2)
        return -1;
    oc_fill16(j, 0, 0, g.n, 4.0f, &s); /* every element: what is not rotated must stay */
    for (i = 0; i < t; i++) {
        int64_t pos = c->p.rope.pos_lo +
                      (int64_t)(ref_next64(&s) % (uint64_t)(c->p.rope.pos_hi - c->p.rope.pos_lo));
        if (i == 0) /* token 0 is rotated (position 0 is the identity) */
            pos = max_pos ? 1 + (pos & 0x7fffffff) % (max_pos - 1) : pos ? pos : 1;
        if (c->p.rope.pos64) oc_setl(oc_img(j, 1), i, pos);
        else oc_seti(oc_img(j, 1), i, (int32_t)pos);
    }
    if (max_pos) {
        double *row = (double *)malloc((size_t)rot * sizeof(double));
        if (!row) return -1;
        for (p = 0; p < max_pos; p++) {
            ref_rope_theta_row(row, (double)p, 10000.0, rot);
            for (i = 0; i < rot; i++) oc_setf(oc_img(j, 2), p * rot + i, (float)row[i]);
        }
        free(row);
    }
    return 0;
}

static void rope_args(const oc_job *j, const oc_dev *d, op_args *a) {
    const oc_case *c = &j->c;
    rope_geo g;
    rope_geometry(c, &g);
    a->rope.q = P(0) + (CUdeviceptr)(2 * g.q);
    a->rope.k = c->p.rope.hk ? P(0) + (CUdeviceptr)(2 * g.k) : 0;
    a->rope.positions = P(1);
    a->rope.cos_sin_cache = c->p.rope.max_pos ? P(2) : 0;
    a->rope.tokens = c->p.rope.tokens; a->rope.num_q_heads = c->p.rope.hq;
    a->rope.num_kv_heads = c->p.rope.hk; a->rope.head_dim = c->p.rope.d;
    a->rope.rot_dim = c->p.rope.rot; a->rope.q_stride = g.q_stride;
    a->rope.k_stride = c->p.rope.hk ? g.k_stride : 0;
    a->rope.max_pos = c->p.rope.max_pos; a->rope.theta = c->p.rope.theta;
    a->rope.dtype = c->dt;
    a->rope.positions_dtype = c->p.rope.pos64 ? TALON_INDEX_I64 : TALON_INDEX_I32;
    a->rope.style = c->p.rope.gptj ? TALON_ROPE_GPTJ : TALON_ROPE_NEOX;
}

static void rope_check(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget) {
    const oc_case *c = &j->c;
    const talon_dtype dt = c->dt;
    const int64_t rot = c->p.rope.rot ? c->p.rope.rot : c->p.rope.d, half = rot / 2;
    const int64_t heads = c->p.rope.hq + c->p.rope.hk, d = c->p.rope.d;
    /* half a unit in the last place (one correct rounding) + fp32 arithmetic and cos/sin (and
       in theta mode the documented angle error, 1e-14 |position| rad) + f16 subnormals */
    const double rhalf = dt == TALON_DTYPE_BF16 ? 0x1p-8 : 0x1p-11;
    const double atol = dt == TALON_DTYPE_BF16 ? 0 : 0x1p-25;
    const uint8_t *init = oc_img(j, 0), *dev = img[0];
    rope_geo g;
    unsigned char *mask;
    double *x = (double *)malloc((size_t)rot * 3 * sizeof(double)), *y = x + rot, *cs = y + rot;
    int64_t t, h, i;
    (void)budget;
    rope_geometry(c, &g);
    mask = (unsigned char *)calloc((size_t)g.n, 1);
    if (!x || !mask) { oc_fail(st, "out of host memory"); goto done; }
    for (t = 0; t < c->p.rope.tokens; t++) {
        const int64_t p = c->p.rope.pos64 ? oc_getl(oc_img(j, 1), t) : oc_geti(oc_img(j, 1), t);
        const double noise = 0x1p-18 + (c->p.rope.max_pos ? 0.0 : 1e-14 * fabs((double)p));
        if (!c->p.rope.max_pos) {
            ref_rope_theta_row(cs, (double)p, c->p.rope.theta ? c->p.rope.theta : 10000.0, rot);
        } else if (p < 0 || p >= c->p.rope.max_pos) {
            continue; /* out of the cache: the token must stay unchanged */
        } else {
            for (i = 0; i < rot; i++) cs[i] = oc_getf(oc_img(j, 2), p * rot + i);
        }
        for (h = 0; h < heads; h++) {
            const int64_t base = h < c->p.rope.hq ? g.q + t * g.row_q + h * d
                                                  : g.k + t * g.row_k + (h - c->p.rope.hq) * d;
            for (i = 0; i < rot; i++) x[i] = REF_TO_F32(dt, oc_get16(init, base + i));
            memcpy(y, x, (size_t)rot * sizeof(double));
            ref_rope_head(y, rot, c->p.rope.gptj, cs);
            for (i = 0; i < rot; i++) {
                const int64_t partner = c->p.rope.gptj ? (i ^ 1) : (i < half ? i + half : i - half);
                mask[base + i] = 1;
                oc_cmp(st, h < c->p.rope.hq ? "q" : "k", t, (h % c->p.rope.hq) * d + i,
                       REF_TO_F32(dt, oc_get16(dev, base + i)), y[i],
                       rhalf * fabs(y[i]) + noise * (fabs(x[i]) + fabs(x[partner])) + atol);
            }
        }
    }
    for (i = 0; i < g.n; i++) /* dims past rot_dim, v, padding, tokens out of the cache */
        if (!mask[i] && oc_get16(dev, i) != oc_get16(init, i)) {
            oc_fail(st, "qkv element %lld (not to be rotated) changed: 0x%04x -> 0x%04x",
                    (long long)i, oc_get16(init, i), oc_get16(dev, i));
            break;
        }
done:
    free(x); free(mask);
}

static const oc_op rope_oc = {rope_random, rope_build, rope_args, rope_check, rope_describe, NULL};
#endif

#ifdef CHECKED_FAMILY_CASES /* test_gpu_checked.c */
#ifndef CHECKED_BASELINE
static int rope_case(const char *name, talon_rope_style style, int pos64, int cache,
                     int64_t bad_t, int64_t bad_pos) {
    enum { T = 50, HQ = 8, HK = 2, D = 128, MAXPOS = 64 };
    uint16_t *q = random_16(TALON_DTYPE_BF16, T * HQ * D, 21, 1.0f);
    uint16_t *k = random_16(TALON_DTYPE_BF16, T * HK * D, 22, 1.0f);
    float *cs = (float *)malloc(MAXPOS * D * 4);
    int64_t pos[T];
    int32_t pos32[T];
    region rg[2];
    CUdeviceptr dpos = gpu_alloc(T * 8), dcache = cache ? gpu_alloc(MAXPOS * D * 4) : 0;
    talon_rope_args a;
    want_report w = {NULL, NULL, 0, 0, 0, NULL};
    int64_t t, i;
    int fails;
    for (i = 0; i < MAXPOS; i++)
        for (t = 0; t < D / 2; t++) {
            const double ang = (double)i * pow(10000.0, -2.0 * (double)t / D);
            cs[i * D + t] = (float)cos(ang);
            cs[i * D + D / 2 + t] = (float)sin(ang);
        }
    for (t = 0; t < T; t++) pos[t] = (t * 7) % MAXPOS;
    if (bad_t >= 0) pos[bad_t] = bad_pos;
    for (t = 0; t < T; t++) pos32[t] = (int32_t)pos[t];
    upload(dpos, pos64 ? (const void *)pos : (const void *)pos32, pos64 ? T * 8 : T * 4);
    if (cache) upload(dcache, cs, MAXPOS * D * 4);
    rg[0] = region_new(T * HQ * D * 2, GUARD, q);
    rg[1] = region_new(T * HK * D * 2, GUARD, k);
    memset(&a, 0, sizeof a);
    a.q = rg[0].p; a.k = rg[1].p; a.positions = dpos; a.cos_sin_cache = dcache;
    a.tokens = T; a.num_q_heads = HQ; a.num_kv_heads = HK; a.head_dim = D; a.max_pos = MAXPOS;
    a.positions_dtype = pos64 ? TALON_INDEX_I64 : TALON_INDEX_I32; a.style = style;
    if (bad_t >= 0 && cache) {
        w.op = "talon_rope"; w.what = "positions";
        w.index = bad_t; w.value = bad_pos; w.bound = MAXPOS;
    }
    fails = run_pair(name, rg, 2, OP_rope, &a, &a, &w, NULL, NULL);
    region_free(&rg[0]); region_free(&rg[1]);
    cu.cuMemFree(dpos);
    if (dcache) cu.cuMemFree(dcache);
    free(q); free(k); free(cs);
    return fails;
}

static void test_rope(void **state) {
    int fails = 0;
    (void)state;
    fails += rope_case("rope NeoX cache valid", TALON_ROPE_NEOX, 0, 1, -1, 0);
    fails += rope_case("rope NeoX cache position = max_pos", TALON_ROPE_NEOX, 0, 1, 21, 64);
    fails += rope_case("rope GPT-J cache position -3 (int64)", TALON_ROPE_GPTJ, 1, 1, 7, -3);
    fails += rope_case("rope NeoX cache position 2^40 (int64)", TALON_ROPE_NEOX, 1, 1, 49, 1LL << 40);
    fails += rope_case("rope theta: any position is valid", TALON_ROPE_NEOX, 1, 0, 3, -123456789);
    if (fails) fail_msg("%d rope failures", fails);
}
#endif

/* rope with a cos/sin cache */
static int rope_bench(bench_case *cases) {
    enum { TOK = 4096, HQ = 32, HK = 8, D = 128 };
    static talon_rope_args rope;
    int64_t t;
    int nc = 0;
    int32_t *pos = (int32_t *)malloc(TOK * 4);
    float *cs = (float *)calloc((size_t)8192 * D, 4);
    CUdeviceptr dp = gpu_alloc(TOK * 4), dc = gpu_alloc((size_t)8192 * D * 4);
    for (t = 0; t < TOK; t++) pos[t] = (int32_t)t;
    upload(dp, pos, TOK * 4);
    upload(dc, cs, (size_t)8192 * D * 4);
    free(pos); free(cs);
    memset(&rope, 0, sizeof rope);
    rope.q = bench_fill((size_t)TOK * HQ * D * 2, 3); rope.k = bench_fill((size_t)TOK * HK * D * 2, 4);
    rope.positions = dp; rope.cos_sin_cache = dc; rope.tokens = TOK; rope.num_q_heads = HQ;
    rope.num_kv_heads = HK; rope.head_dim = D; rope.max_pos = 8192;
    cases[nc].name = "rope 4096 tok, 32 + 8 heads, cache"; cases[nc].op = OP_rope; cases[nc++].args = &rope;
    return nc;
}
#endif
