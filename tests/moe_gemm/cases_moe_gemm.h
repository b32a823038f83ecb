/* The moe_gemm family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_MOE_GEMM_H
#define TALON_TESTS_CASES_MOE_GEMM_H

#define MOE_GEMM_TEST_OPS(X) X(moe_gemm, moe_gemm) X(grouped_gemm, grouped_gemm)
/* bench/shim.c: the fields of its args structs, in talon.h's order (kinds: bench/shim.c) */
#define MOE_GEMM_BENCH_STRUCTS(S, F) \
    S(talon_moe_gemm_args, \
      F(d, PTR) F(a, PTR) F(b, PTR) F(sorted_token_ids, PTR) F(expert_ids, PTR) \
      F(num_tokens_post_padded, PTR) F(topk_weights, PTR) F(tokens, I64) F(topk, I64) \
      F(experts, I64) F(block_size, I64) F(sorted_capacity, I64) F(expert_ids_capacity, I64) \
      F(n, I64) F(k, I64) F(lda, I64) F(ldb, I64) F(ldd, I64) F(a_rows, ENUM) F(d_rows, ENUM) \
      F(act, ENUM) F(gated, I32) F(dtype, ENUM) F(scale, ENUM) F(a_scale, PTR) F(b_scale, PTR) \
      F(bias, PTR) F(act_alpha, F32) F(act_limit, F32)) \
    S(talon_grouped_gemm_args, \
      F(d, PTR) F(a, PTR) F(b, PTR) F(tile_groups, PTR) F(rows_used, PTR) F(group_rows, PTR) \
      F(a_scale, PTR) F(b_scale, PTR) F(groups, I64) F(rows, I64) F(n, I64) F(k, I64) \
      F(lda, I64) F(ldb, I64) F(ldd, I64) F(layout, ENUM) F(act, ENUM) F(scale, ENUM) \
      F(gated, I32) F(dtype, ENUM) F(bias, PTR) F(act_alpha, F32) F(act_limit, F32))

#define MOE_GEMM_CHECKED_OPS(X)                                                                 \
    X(moe_gemm, talon__moe_gemm_params, test_moe_gemm)                                          \
    X(grouped_gemm, talon__moe_gemm_params, test_grouped_gemm)

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void moe_gemm_valid_args(talon_moe_gemm_args *a) {
    a->d = 1 * GB; a->a = 2 * GB; a->b = 3 * GB;
    a->sorted_token_ids = 4 * GB; a->expert_ids = 5 * GB;
    a->num_tokens_post_padded = 6 * GB; a->topk_weights = 7 * GB;
    a->tokens = 4; a->topk = 2; a->experts = 8;
    a->block_size = 128; a->sorted_capacity = 1024;
    a->expert_ids_capacity = 8; a->n = 64; a->k = 64;
    a->a_rows = TALON_MOE_ROWS_TOKEN; a->d_rows = TALON_MOE_ROWS_PAIR;
    a->act = TALON_GEMM_ACT_SILU; a->gated = 1;
}

static void grouped_gemm_valid_args(talon_grouped_gemm_args *a) {
    a->d = 1 * GB; a->a = 2 * GB; a->b = 3 * GB;
    a->group_rows = 4 * GB; a->groups = 8;
    a->rows = 256; a->n = 64; a->k = 64;
    a->layout = TALON_GROUPED_MASKED; a->act = TALON_GEMM_ACT_SILU;
    a->gated = 1;
}
#endif

#ifdef TALON_TESTS_OP_CASES_H /* oc_case's params */
typedef struct {
    int64_t tokens, topk, experts, n, k, pad;
    int gated, weights, masked;
    talon_gemm_act act;
    talon_moe_rows a_rows, d_rows;
    int bias;    /* a bias [experts, b rows] */
    float limit; /* act CLAMPED_SWIGLU's (alpha: OC_MOE_ALPHA) */
} mg_params;
/* grouped_gemm: rows of a and d (CONTIGUOUS) or per group (MASKED) */
typedef struct {
    int64_t groups, rows, n, k, pad;
    int gated, masked, used;
    talon_gemm_act act;
    int bias;    /* a bias [groups, b rows] */
    float limit; /* act CLAMPED_SWIGLU's */
} gg_params;
#define MOE_GEMM_OC_PARAMS mg_params mg; gg_params gg;
#endif

#endif

#ifdef OC_FAMILY_CASES /* op_cases.h */
#include "../moe/ref_moe.h"
#include "ref_moe_gemm.h"

#define OC_MOE_ALPHA 1.702f /* CLAMPED_SWIGLU's alpha (gpt-oss's) */

/* act: any of NONE .. GELU_TANH, or gated CLAMPED_SWIGLU with a limit that clamps often (2)
   or seldom (8); a bias in 3 of 10 cases */
static void mg_random_epilogue(uint64_t *s, int gated, talon_gemm_act *act, float *limit, int *bias) {
    *act = (talon_gemm_act)oc_ri(s, 0, gated ? 5 : 4);
    *limit = *act == TALON_GEMM_ACT_CLAMPED_SWIGLU ? (oc_chance(s, 50) ? 2.f : 8.f) : 0.f;
    *bias = oc_chance(s, 30);
}

/* A bias of n_rows rows from bias bits of type t (NULL without one) into x. */
static const double *mg_bias_row(const uint8_t *img, int has, talon_dtype t, int64_t at,
                                 int64_t n_rows, double *x) {
    int64_t i;
    if (!has) return NULL;
    for (i = 0; i < n_rows; i++) x[i] = REF_TO_F32(t, oc_get16(img, at + i));
    return x;
}

/* moe_gemm: moe_align's capacities (block 128) and the rows of a and d */
static int64_t mg_rows(talon_moe_rows rows, const oc_case *c, int64_t scap) {
    return rows == TALON_MOE_ROWS_SORTED ? scap
           : rows == TALON_MOE_ROWS_TOKEN ? c->p.mg.tokens : c->p.mg.tokens * c->p.mg.topk;
}

static void mg_random(oc_case *c, uint64_t *s, int big) {
    static const talon_moe_rows a_rows[] = {TALON_MOE_ROWS_SORTED, TALON_MOE_ROWS_TOKEN,
                                            TALON_MOE_ROWS_PAIR};
    c->p.mg.experts = oc_len(s, 1, big ? 32 : 16);
    c->p.mg.topk = oc_ri(s, 1, c->p.mg.experts < 4 ? c->p.mg.experts : 4);
    c->p.mg.tokens = oc_len(s, 1, big ? 512 : 64);
    c->p.mg.n = 8 * oc_len(s, 1, big ? 64 : 48);
    c->p.mg.k = 8 * oc_len(s, 1, big ? 64 : 48);
    c->p.mg.pad = oc_chance(s, 25) ? 8 : 0;
    c->p.mg.gated = oc_chance(s, 50);
    mg_random_epilogue(s, c->p.mg.gated, &c->p.mg.act, &c->p.mg.limit, &c->p.mg.bias);
    c->p.mg.a_rows = a_rows[oc_ri(s, 0, 2)];
    c->p.mg.d_rows = oc_chance(s, 50) ? TALON_MOE_ROWS_SORTED : TALON_MOE_ROWS_PAIR;
    c->p.mg.weights = oc_chance(s, 50);
    c->p.mg.masked = oc_chance(s, 20);
}

static int mg_describe(const oc_case *c, char *buf, size_t n, const char *name,
                       const char *dt, unsigned long long seed) {
    return snprintf(buf, n, "%s %s tokens %lld topk %lld experts %lld n %lld k %lld pad %lld "
                    "gated %d act %d limit %g bias %d rows %d->%d weights %d masked %d seed %llx",
                    name, dt, (long long)c->p.mg.tokens, (long long)c->p.mg.topk,
                    (long long)c->p.mg.experts, (long long)c->p.mg.n, (long long)c->p.mg.k,
                    (long long)c->p.mg.pad, c->p.mg.gated, (int)c->p.mg.act,
                    (double)c->p.mg.limit, c->p.mg.bias, (int)c->p.mg.a_rows,
                    (int)c->p.mg.d_rows, c->p.mg.weights, c->p.mg.masked, seed);
}

static int mg_build(oc_job *j, talon_ctx *ctx) {
    const oc_case *c = &j->c;
    const int64_t t = c->p.mg.tokens, topk = c->p.mg.topk, e = c->p.mg.experts;
    const int64_t n = c->p.mg.n, k = c->p.mg.k, ld_ab = k + c->p.mg.pad, ldd = n + c->p.mg.pad;
    const int64_t brows = c->p.mg.gated ? 2 * n : n;
    int64_t scap = 0, ecap = 0, i, r, col;
    int32_t *ids, npost = 0;
    uint64_t s = c->seed;
    (void)ctx;
    talon_moe_align_block_size_capacity(t, topk, e, 128, &scap, &ecap);
    if (oc_add(j, "a", OC_IN, 2, mg_rows(c->p.mg.a_rows, c, scap) * ld_ab, 0) != 0 ||
        oc_add(j, "b", OC_IN, 2, e * brows * ld_ab, 0) != 1 ||
        oc_add(j, "sorted_token_ids", OC_IN, 4, scap, 0) != 2 ||
        oc_add(j, "expert_ids", OC_IN, 4, ecap, 0) != 3 ||
        oc_add(j, "num_tokens_post_padded", OC_IN, 4, 1, 0) != 4 ||
        oc_add(j, "topk_weights", OC_IN, 4, t * topk, 0) != 5 ||
        oc_add(j, "d", OC_OUT, 2, mg_rows(c->p.mg.d_rows, c, scap) * ldd, 0) != 6 ||
        oc_add(j, "bias", OC_IN, 2, c->p.mg.bias ? e * brows : 1, 0) != 7)
        return -1;
    if (!(ids = (int32_t *)malloc((size_t)(t * topk) * sizeof(int32_t)))) return -1;
    for (r = 0; r < t; r++) /* distinct experts per token; masked: a quarter -1 */
        for (i = 0; i < topk; i++) {
            int32_t x;
            int dup;
            do {
                int64_t q;
                x = (int32_t)oc_ri(&s, 0, e - 1);
                for (dup = 0, q = 0; q < i; q++) dup |= ids[r * topk + q] == x;
            } while (dup);
            ids[r * topk + i] = x;
            oc_setf(oc_img(j, 5), r * topk + i, 0.25f + ref_unit01(&s));
        }
    if (c->p.mg.masked) /* (pair 0 keeps its expert) */
        for (i = 1; i < t * topk; i++)
            if (oc_chance(&s, 25)) ids[i] = -1;
    /* moe_align's layout, from its reference (the contract talon_moe_align_block_size meets) */
    r = ref_moe_align(ids, t, topk, e, 128, (int32_t *)oc_img(j, 2), scap, (int32_t *)oc_img(j, 3),
                      ecap, &npost);
    free(ids);
    if (r) return -1;
    oc_seti(oc_img(j, 4), 0, npost);
    /* a and b: random rows, NaN padding */
    for (r = 0; r < (int64_t)(j->b[0].used / 2) / ld_ab; r++)
        for (col = 0; col < k; col++) oc_set16(oc_img(j, 0), r * ld_ab + col, oc_bits(c->dt, oc_u(&s)));
    for (r = 0; r < e * brows; r++)
        for (col = 0; col < k; col++) oc_set16(oc_img(j, 1), r * ld_ab + col, oc_bits(c->dt, oc_u(&s)));
    for (r = 0; c->p.mg.bias && r < e * brows; r++) oc_set16(oc_img(j, 7), r, oc_bits(c->dt, oc_u(&s)));
    return 0;
}

static void mg_args(const oc_job *j, const oc_dev *d, op_args *a) {
    const oc_case *c = &j->c;
    int64_t scap = 0, ecap = 0;
    talon_moe_align_block_size_capacity(c->p.mg.tokens, c->p.mg.topk, c->p.mg.experts, 128,
                                        &scap, &ecap);
    a->moe_gemm.d = P(6); a->moe_gemm.a = P(0); a->moe_gemm.b = P(1);
    a->moe_gemm.sorted_token_ids = P(2); a->moe_gemm.expert_ids = P(3);
    a->moe_gemm.num_tokens_post_padded = P(4);
    a->moe_gemm.topk_weights = c->p.mg.weights ? P(5) : 0;
    a->moe_gemm.tokens = c->p.mg.tokens; a->moe_gemm.topk = c->p.mg.topk;
    a->moe_gemm.experts = c->p.mg.experts; a->moe_gemm.block_size = 128;
    a->moe_gemm.sorted_capacity = scap; a->moe_gemm.expert_ids_capacity = ecap;
    a->moe_gemm.n = c->p.mg.n; a->moe_gemm.k = c->p.mg.k;
    if (c->p.mg.pad) {
        a->moe_gemm.lda = a->moe_gemm.ldb = c->p.mg.k + c->p.mg.pad;
        a->moe_gemm.ldd = c->p.mg.n + c->p.mg.pad;
    }
    a->moe_gemm.a_rows = c->p.mg.a_rows; a->moe_gemm.d_rows = c->p.mg.d_rows;
    a->moe_gemm.act = c->p.mg.act; a->moe_gemm.gated = c->p.mg.gated;
    a->moe_gemm.dtype = c->dt;
    a->moe_gemm.bias = c->p.mg.bias ? P(7) : 0;
    if (c->p.mg.act == TALON_GEMM_ACT_CLAMPED_SWIGLU) {
        a->moe_gemm.act_alpha = OC_MOE_ALPHA; a->moe_gemm.act_limit = c->p.mg.limit;
    }
}

static void mg_check(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget) {
    const oc_case *c = &j->c;
    const int64_t n = c->p.mg.n, k = c->p.mg.k, topk = c->p.mg.topk, ld_ab = k + c->p.mg.pad;
    const int64_t ldd = n + c->p.mg.pad, pairs = c->p.mg.tokens * topk;
    const int64_t brows = c->p.mg.gated ? 2 * n : n;
    const double rel = c->dt == TALON_DTYPE_BF16 ? 0x1p-8 : 0x1p-11;
    const int32_t npost = oc_geti(oc_img(j, 4), 0);
    int64_t scap = 0, ecap = 0, d_rows, s, col, step, cached = -1;
    double *x, *w, *ref, *mag, *bias_x;
    const double *bias = NULL;
    ref_moe_epi epi = {c->p.mg.act, OC_MOE_ALPHA, c->p.mg.limit, NULL};
    char *written;
    talon_moe_align_block_size_capacity(c->p.mg.tokens, topk, c->p.mg.experts, 128, &scap, &ecap);
    d_rows = mg_rows(c->p.mg.d_rows, c, scap);
    x = (double *)malloc((size_t)(k + brows * k + 2 * n + brows) * sizeof(double));
    written = (char *)calloc((size_t)d_rows, 1);
    if (!x || !written) { oc_fail(st, "out of host memory"); goto done; }
    w = x + k;
    ref = w + brows * k;
    mag = ref + n;
    bias_x = mag + n;
    step = oc_step((double)npost * (double)brows * (double)k, budget);
    for (s = 0; s < npost; s++) {
        const int32_t e = oc_geti(oc_img(j, 3), s / 128), f = oc_geti(oc_img(j, 2), s);
        const int pad_slot = f < 0 || f >= pairs;
        const int64_t row = c->p.mg.d_rows == TALON_MOE_ROWS_SORTED ? s : f;
        int64_t a_row, i;
        if (e < 0 || e >= c->p.mg.experts) continue; /* a skipped block */
        if (c->p.mg.d_rows == TALON_MOE_ROWS_PAIR && pad_slot) continue;
        written[row] = 1;
        if (s % step && s != npost - 1) {
            oc_check_written(st, "d", img[6], row * ldd, n, c->dt);
            continue;
        }
        if (cached != e) { /* expert e's rows of b, and its bias */
            for (i = 0; i < brows; i++)
                for (col = 0; col < k; col++)
                    w[i * k + col] = REF_TO_F32(c->dt, oc_get16(oc_img(j, 1), ((int64_t)e * brows + i) * ld_ab + col));
            bias = mg_bias_row(oc_img(j, 7), c->p.mg.bias, c->dt, (int64_t)e * brows, brows, bias_x);
            cached = e;
        }
        /* a's row: padding slots read zeros, except from a SORTED a (its row s as is) */
        a_row = c->p.mg.a_rows == TALON_MOE_ROWS_SORTED ? s
                : pad_slot ? -1 : c->p.mg.a_rows == TALON_MOE_ROWS_TOKEN ? f / topk : f;
        for (col = 0; col < k; col++)
            x[col] = a_row < 0 ? 0.0 : REF_TO_F32(c->dt, oc_get16(oc_img(j, 0), a_row * ld_ab + col));
        epi.bias = pad_slot ? NULL : bias; /* a padding slot takes no bias */
        ref_moe_gemm_row_epi(x, w, n, k, c->p.mg.gated, &epi,
                             c->p.mg.weights ? (pad_slot ? 0.0 : (double)oc_getf(oc_img(j, 5), f)) : 1.0,
                             ref, mag);
        for (col = 0; col < n; col++)
            oc_cmp(st, "d", row, col, REF_TO_F32(c->dt, oc_get16(img[6], row * ldd + col)), ref[col],
                   rel * fabs(ref[col]) + 0x1p-14 * mag[col] + 1e-30);
    }
    /* rows the op must not write (skipped blocks, pairs without an expert, a PAIR d's padding
       slots) and every row's padding stay poisoned */
    for (s = 0; s < d_rows; s++) {
        const int64_t from = written[s] ? n * 2 : 0;
        for (col = from; col < ldd * 2; col++)
            if (img[6][s * ldd * 2 + col] != 0xFF) {
                oc_fail(st, "d row %lld byte %lld written (%s)", (long long)s, (long long)col,
                        written[s] ? "row padding" : "a row the op must not write");
                break;
            }
    }
done:
    free(x); free(written);
}

/* grouped_gemm: rows of a and d */
static int64_t gg_rows(const oc_case *c) {
    return c->p.gg.masked ? c->p.gg.groups * c->p.gg.rows : c->p.gg.rows;
}

/* grouped_gemm fp8: a_scale's row stride (rows rounded up to 4) and b_scale's floats */
static int64_t gg_rows4(const oc_case *c) { return oc_round_up(gg_rows(c), 4); }
static int64_t gg_b_scales(const oc_case *c) {
    const int64_t brows = c->p.gg.gated ? 2 * c->p.gg.n : c->p.gg.n;
    return c->p.gg.groups * ((brows + 127) / 128) * ((c->p.gg.k + 127) / 128);
}

static void gg_random(oc_case *c, uint64_t *s, int big) {
    /* fp8: block scales; k and the row padding in 16-byte units, gated n in 64s */
    const int fp8 = oc_chance(s, 30);
    if (fp8) c->dt = TALON_DTYPE_FP8_E4M3;
    c->p.gg.groups = oc_len(s, 1, big ? 32 : 12);
    c->p.gg.masked = oc_chance(s, 50);
    c->p.gg.rows = c->p.gg.masked ? oc_len(s, 1, big ? 600 : 200) : 128 * oc_len(s, 1, big ? 24 : 6);
    c->p.gg.gated = oc_chance(s, 50);
    c->p.gg.n = fp8 && c->p.gg.gated ? 64 * oc_len(s, 1, big ? 8 : 6) : 8 * oc_len(s, 1, big ? 64 : 48);
    c->p.gg.k = (fp8 ? 16 : 8) * oc_len(s, 1, big ? 64 : 48);
    c->p.gg.pad = oc_chance(s, 25) ? (fp8 ? 16 : 8) : 0;
    mg_random_epilogue(s, c->p.gg.gated, &c->p.gg.act, &c->p.gg.limit, &c->p.gg.bias);
    c->p.gg.used = !c->p.gg.masked && oc_chance(s, 50);
}

static int gg_describe(const oc_case *c, char *buf, size_t n, const char *name,
                       const char *dt, unsigned long long seed) {
    return snprintf(buf, n, "%s %s %s groups %lld rows %lld n %lld k %lld pad %lld gated %d "
                    "act %d limit %g bias %d rows_used %d seed %llx", name, dt,
                    c->p.gg.masked ? "masked" : "contiguous", (long long)c->p.gg.groups,
                    (long long)c->p.gg.rows, (long long)c->p.gg.n, (long long)c->p.gg.k,
                    (long long)c->p.gg.pad, c->p.gg.gated, (int)c->p.gg.act,
                    (double)c->p.gg.limit, c->p.gg.bias, c->p.gg.used, seed);
}

/* Buffers: a, b, the group index (CONTIGUOUS: tile_groups, some tiles -1 or past the groups;
   MASKED: group_rows in [0, rows]), rows_used (a multiple of 128, or all rows), d, and fp8's
   a_scale and b_scale. Elements as the GEMM's cases (fp8: from sets whose k-block sums are
   exact). */
static int gg_build(oc_job *j, talon_ctx *ctx) {
    const oc_case *c = &j->c;
    const int fp8 = c->dt == TALON_DTYPE_FP8_E4M3, isize = fp8 ? 1 : 2;
    const int64_t g = c->p.gg.groups, n = c->p.gg.n, k = c->p.gg.k, ld_ab = k + c->p.gg.pad;
    const int64_t ldd = n + c->p.gg.pad, brows = c->p.gg.gated ? 2 * n : n, rows = gg_rows(c);
    const int64_t index_len = c->p.gg.masked ? g : rows / 128;
    const int64_t a_scales = fp8 ? (k + 127) / 128 * gg_rows4(c) : 1, b_scales = fp8 ? gg_b_scales(c) : 1;
    int64_t i, r, col;
    uint64_t s = c->seed;
    (void)ctx;
    if (oc_add(j, "a", OC_IN, isize, rows * ld_ab, 0) != 0 ||
        oc_add(j, "b", OC_IN, isize, g * brows * ld_ab, 0) != 1 ||
        oc_add(j, c->p.gg.masked ? "group_rows" : "tile_groups", OC_IN, 4, index_len, 0) != 2 ||
        oc_add(j, "rows_used", OC_IN, 4, 1, 0) != 3 ||
        oc_add(j, "d", OC_OUT, 2, rows * ldd, 0) != 4 ||
        oc_add(j, "a_scale", OC_IN, 4, a_scales, 0) != 5 ||
        oc_add(j, "b_scale", OC_IN, 4, b_scales, 0) != 6 ||
        oc_add(j, "bias", OC_IN, 2, c->p.gg.bias ? g * brows : 1, 0) != 7)
        return -1;
    for (i = 0; i < index_len; i++) {
        int64_t v;
        if (c->p.gg.masked) v = oc_ri(&s, 0, c->p.gg.rows);
        else if (oc_chance(&s, 15)) v = oc_chance(&s, 50) ? -1 : g; /* skipped tiles */
        else v = oc_ri(&s, 0, g - 1);
        oc_seti(oc_img(j, 2), i, (int32_t)v);
    }
    oc_seti(oc_img(j, 3), 0, (int32_t)(128 * oc_ri(&s, 0, rows / 128)));
    for (r = 0; r < rows; r++)
        for (col = 0; col < k; col++)
            gemm_input(c, &s, gemm_set_a, OC_COUNT(gemm_set_a), oc_img(j, 0) + (r * ld_ab + col) * isize);
    for (r = 0; r < g * brows; r++)
        for (col = 0; col < k; col++)
            gemm_input(c, &s, gemm_set_b, OC_COUNT(gemm_set_b), oc_img(j, 1) + (r * ld_ab + col) * isize);
    for (r = 0; r < a_scales; r++) oc_setf(oc_img(j, 5), r, 0.5f + ref_unit01(&s));
    for (r = 0; r < b_scales; r++) oc_setf(oc_img(j, 6), r, 0.5f + ref_unit01(&s));
    for (r = 0; c->p.gg.bias && r < g * brows; r++)
        oc_set16(oc_img(j, 7), r, oc_bits(fp8 ? TALON_DTYPE_BF16 : c->dt, oc_u(&s)));
    return 0;
}

static void gg_args(const oc_job *j, const oc_dev *d, op_args *a) {
    const oc_case *c = &j->c;
    a->grouped_gemm.d = P(4); a->grouped_gemm.a = P(0); a->grouped_gemm.b = P(1);
    if (c->p.gg.masked) a->grouped_gemm.group_rows = P(2);
    else a->grouped_gemm.tile_groups = P(2);
    a->grouped_gemm.rows_used = c->p.gg.used ? P(3) : 0;
    a->grouped_gemm.groups = c->p.gg.groups; a->grouped_gemm.rows = c->p.gg.rows;
    a->grouped_gemm.n = c->p.gg.n; a->grouped_gemm.k = c->p.gg.k;
    if (c->p.gg.pad) {
        a->grouped_gemm.lda = a->grouped_gemm.ldb = c->p.gg.k + c->p.gg.pad;
        a->grouped_gemm.ldd = c->p.gg.n + c->p.gg.pad;
    }
    a->grouped_gemm.layout = c->p.gg.masked ? TALON_GROUPED_MASKED : TALON_GROUPED_CONTIGUOUS;
    a->grouped_gemm.act = c->p.gg.act; a->grouped_gemm.gated = c->p.gg.gated;
    a->grouped_gemm.dtype = c->dt;
    a->grouped_gemm.bias = c->p.gg.bias ? P(7) : 0;
    if (c->p.gg.act == TALON_GEMM_ACT_CLAMPED_SWIGLU) {
        a->grouped_gemm.act_alpha = OC_MOE_ALPHA; a->grouped_gemm.act_limit = c->p.gg.limit;
    }
    if (c->dt == TALON_DTYPE_FP8_E4M3) {
        a->grouped_gemm.scale = TALON_GEMM_SCALE_BLOCK;
        a->grouped_gemm.a_scale = P(5); a->grouped_gemm.b_scale = P(6);
    }
}

/* grouped_gemm: element (r, col) of a or b as a double (fp8: times its block scale) */
static double gg_value(const oc_job *j, int bi, int64_t at, int64_t scale_at) {
    if (j->c.dt != TALON_DTYPE_FP8_E4M3) return REF_TO_F32(j->c.dt, oc_get16(oc_img(j, bi), at));
    return ref_e4m3_to_f64(oc_img(j, bi)[at]) * (double)oc_getf(oc_img(j, bi == 0 ? 5 : 6), scale_at);
}

/* Every row of d: its group's product (a sample of rows when large), or still poisoned (rows
   of skipped tiles, past rows_used or past a group's count) with the row padding. */
static void gg_check(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget) {
    const oc_case *c = &j->c;
    const int64_t n = c->p.gg.n, k = c->p.gg.k, ld_ab = k + c->p.gg.pad, ldd = n + c->p.gg.pad;
    const int64_t brows = c->p.gg.gated ? 2 * n : n, rows = gg_rows(c);
    const int64_t used = c->p.gg.used ? oc_geti(oc_img(j, 3), 0) : rows;
    const int64_t kb = (k + 127) / 128, rows4 = gg_rows4(c), blocks = (brows + 127) / 128;
    const int fp8 = c->dt == TALON_DTYPE_FP8_E4M3;
    const talon_dtype ot = fp8 ? TALON_DTYPE_BF16 : c->dt;
    /* d's rounding; the fp32 sums (fp8: one rounding per k-block) */
    const double rel = ot == TALON_DTYPE_BF16 ? 0x1p-8 : 0x1p-11;
    const double e_mag = fp8 ? 0x1p-24 * (double)(kb + 16) : 0x1p-14;
    const int64_t step = oc_step((double)rows * (double)brows * (double)k, budget);
    int64_t r, col, i, cached = -1;
    double *x = (double *)malloc((size_t)(k + brows * k + 2 * n + brows) * sizeof(double)), *w, *ref, *mag;
    ref_moe_epi epi = {c->p.gg.act, OC_MOE_ALPHA, c->p.gg.limit, NULL};
    if (!x) { oc_fail(st, "out of host memory"); return; }
    w = x + k;
    ref = w + brows * k;
    mag = ref + n;
    for (r = 0; r < rows; r++) {
        int64_t g;
        if (c->p.gg.masked) {
            g = r / c->p.gg.rows;
            if (r % c->p.gg.rows >= oc_geti(oc_img(j, 2), g)) g = -1;
        } else {
            g = oc_geti(oc_img(j, 2), r / 128);
            if (r >= used || g >= c->p.gg.groups) g = -1;
        }
        for (col = g >= 0 ? n * 2 : 0; col < ldd * 2; col++)
            if (img[4][r * ldd * 2 + col] != 0xFF) {
                oc_fail(st, "d row %lld byte %lld written (%s)", (long long)r, (long long)col,
                        g >= 0 ? "row padding" : "a row the op must not write");
                break;
            }
        if (g < 0) continue;
        if (r % step && r != rows - 1) {
            oc_check_written(st, "d", img[4], r * ldd, n, ot);
            continue;
        }
        if (cached != g) {
            for (i = 0; i < brows; i++)
                for (col = 0; col < k; col++)
                    w[i * k + col] = gg_value(j, 1, (g * brows + i) * ld_ab + col,
                                              (g * blocks + i / 128) * kb + col / 128);
            epi.bias = mg_bias_row(oc_img(j, 7), c->p.gg.bias, ot, g * brows, brows, mag + n);
            cached = g;
        }
        for (col = 0; col < k; col++) x[col] = gg_value(j, 0, r * ld_ab + col, (col / 128) * rows4 + r);
        ref_moe_gemm_row_epi(x, w, n, k, c->p.gg.gated, &epi, 1.0, ref, mag);
        for (col = 0; col < n; col++)
            oc_cmp(st, "d", r, col, REF_TO_F32(ot, oc_get16(img[4], r * ldd + col)), ref[col],
                   rel * fabs(ref[col]) + e_mag * mag[col] + 1e-30);
    }
    free(x);
}

static const oc_op moe_gemm_oc = {mg_random, mg_build, mg_args, mg_check, mg_describe, NULL};
static const oc_op grouped_gemm_oc = {gg_random, gg_build, gg_args, gg_check, gg_describe, NULL};
#endif

#ifdef CHECKED_FAMILY_CASES /* test_gpu_checked.c */
#ifndef CHECKED_BASELINE
/* bad: 0 none, 1 sorted id above the sentinel, 2 negative sorted id, 3 num_post too large */
static int moe_case(const char *name, int bad) {
    enum { T = 64, TOPK = 2, E = 8, N = 128, K = 128 };
    int32_t ids[T * TOPK], *sorted, post;
    int64_t sorted_cap = 0, blocks_cap = 0, i, s_bad = -1;
    float wts[T * TOPK];
    uint16_t *ha = random_16(TALON_DTYPE_BF16, T * K, 61, 1.0f);
    uint16_t *hb = random_16(TALON_DTYPE_BF16, E * N * K, 62, 0.1f);
    uint64_t s = ref_mix64(63);
    region rg[1];
    CUdeviceptr da, db, dids, dw, dsorted, dexp, dpost, dsorted_bad, dpost_bad;
    talon_moe_align_block_size_args al;
    talon_moe_gemm_args a, c;
    want_report w = {NULL, NULL, 0, 0, 0, NULL};
    int fails;
    talon_moe_align_block_size_capacity(T, TOPK, E, 128, &sorted_cap, &blocks_cap);
    for (i = 0; i < T * TOPK; i++) {
        ids[i] = (int32_t)((i / TOPK * 3 + (i % TOPK) * 5) % E);
        if (ref_unit01(&s) < 0.2f) ids[i] = -1; /* expert parallelism's masking: no violation */
        wts[i] = 0.25f + ref_unit01(&s);
    }
    da = gpu_alloc(T * K * 2); db = gpu_alloc(E * N * K * 2);
    dids = gpu_alloc(sizeof ids); dw = gpu_alloc(sizeof wts);
    dsorted = gpu_alloc((size_t)sorted_cap * 4); dexp = gpu_alloc((size_t)blocks_cap * 4);
    dpost = gpu_alloc(4); dsorted_bad = gpu_alloc((size_t)sorted_cap * 4); dpost_bad = gpu_alloc(4);
    upload(da, ha, T * K * 2); upload(db, hb, E * N * K * 2);
    upload(dids, ids, sizeof ids); upload(dw, wts, sizeof wts);
    memset(&al, 0, sizeof al);
    al.sorted_token_ids = dsorted; al.expert_ids = dexp; al.num_tokens_post_padded = dpost;
    al.topk_ids = dids; al.tokens = T; al.k = TOPK; al.experts = E; al.block_size = 128;
    al.sorted_capacity = sorted_cap; al.expert_ids_capacity = blocks_cap;
    if (talon_moe_align_block_size(g_chk, g.stream, &al) != TALON_SUCCESS) { /* not checked */
        print_error("%s: moe_align: %s\n", name, talon_last_error());
        return 1;
    }
    GPU_CK(cu.cuStreamSynchronize(g.stream));
    sorted = (int32_t *)malloc((size_t)sorted_cap * 4);
    GPU_CK(cu.cuMemcpyDtoH(sorted, dsorted, (size_t)sorted_cap * 4));
    GPU_CK(cu.cuMemcpyDtoH(&post, dpost, 4));
    if (bad == 1 || bad == 2) { /* a real pair's slot of the first block (it has work) */
        s_bad = 0;
        sorted[s_bad] = bad == 1 ? T * TOPK + 5 : -7;
    }
    upload(dsorted_bad, sorted, (size_t)sorted_cap * 4);
    if (bad == 3) post = (int32_t)(blocks_cap < sorted_cap / 128 ? blocks_cap : sorted_cap / 128) * 128 + 128;
    upload(dpost_bad, &post, 4);
    rg[0] = region_new(T * TOPK * N * 2, GUARD, NULL);
    memset(&a, 0, sizeof a);
    a.d = rg[0].p; a.a = da; a.b = db; a.sorted_token_ids = dsorted_bad; a.expert_ids = dexp;
    a.num_tokens_post_padded = dpost_bad; a.topk_weights = dw; a.tokens = T; a.topk = TOPK;
    a.experts = E; a.block_size = 128; a.sorted_capacity = sorted_cap;
    a.expert_ids_capacity = blocks_cap; a.n = N; a.k = K; a.a_rows = TALON_MOE_ROWS_TOKEN;
    a.d_rows = TALON_MOE_ROWS_PAIR; a.act = TALON_GEMM_ACT_SILU;
    c = a; /* a bad id is padding and a long num_post is cut without checking: same inputs */
    if (bad == 1 || bad == 2) {
        w.op = "talon_moe_gemm"; w.what = "sorted_token_ids";
        w.index = s_bad; w.value = sorted[s_bad]; w.bound = T * TOPK;
    } else if (bad == 3) {
        w.op = "talon_moe_gemm"; w.what = "num_tokens_post_padded";
        w.index = 0; w.value = post; w.bound = post - 128;
    }
    fails = run_pair(name, rg, 1, OP_moe_gemm, &c, &a, &w, NULL, NULL);
    region_free(&rg[0]);
    cu.cuMemFree(da); cu.cuMemFree(db); cu.cuMemFree(dids); cu.cuMemFree(dw);
    cu.cuMemFree(dsorted); cu.cuMemFree(dexp); cu.cuMemFree(dpost);
    cu.cuMemFree(dsorted_bad); cu.cuMemFree(dpost_bad);
    free(sorted); free(ha); free(hb);
    return fails;
}

static void test_moe_gemm(void **state) {
    int fails = 0;
    (void)state;
    fails += moe_case("moe_gemm valid (-1 experts masked)", 0);
    fails += moe_case("moe_gemm sorted id above the sentinel", 1);
    fails += moe_case("moe_gemm sorted id -7", 2);
    fails += moe_case("moe_gemm num_tokens_post_padded past the capacities", 3);
    if (fails) fail_msg("%d moe_gemm failures", fails);
}

/* ================================================================ grouped_gemm */
/* bad: 0 none, 1 a masked count above rows, 2 a negative masked count, 3 rows_used past the
   rows (contiguous) */
static int grouped_case(const char *name, int bad) {
    enum { G = 4, ROWS = 100, CROWS = 256, N = 128, K = 128 };
    const int masked = bad != 3;
    const int64_t rows = masked ? G * ROWS : CROWS;
    int32_t counts[G] = {0, ROWS, 37, 64}, tiles[CROWS / 128] = {2, -1}, used = CROWS + 128;
    uint16_t *ha = random_16(TALON_DTYPE_BF16, (size_t)rows * K, 71, 1.0f);
    uint16_t *hb = random_16(TALON_DTYPE_BF16, G * N * K, 72, 0.1f);
    region rg[1];
    CUdeviceptr da, db, didx, dused;
    talon_grouped_gemm_args a;
    want_report w = {NULL, NULL, 0, 0, 0, "talon_moe_gemm"};
    int fails;
    if (bad == 1) counts[2] = ROWS + 9;
    if (bad == 2) counts[2] = -3;
    da = gpu_alloc((size_t)rows * K * 2); db = gpu_alloc(G * N * K * 2);
    didx = gpu_alloc(sizeof counts); dused = gpu_alloc(4);
    upload(da, ha, (size_t)rows * K * 2); upload(db, hb, G * N * K * 2);
    if (masked) upload(didx, counts, sizeof counts);
    else upload(didx, tiles, sizeof tiles);
    upload(dused, &used, 4);
    rg[0] = region_new((size_t)rows * N * 2, GUARD, NULL);
    memset(&a, 0, sizeof a);
    a.d = rg[0].p; a.a = da; a.b = db; a.groups = G; a.n = N; a.k = K;
    a.act = TALON_GEMM_ACT_SILU; a.dtype = TALON_DTYPE_BF16;
    if (masked) {
        a.layout = TALON_GROUPED_MASKED; a.group_rows = didx; a.rows = ROWS;
    } else {
        a.layout = TALON_GROUPED_CONTIGUOUS; a.tile_groups = didx; a.rows_used = dused;
        a.rows = CROWS;
    }
    if (bad == 1 || bad == 2) {
        w.op = "talon_grouped_gemm"; w.what = "group_rows";
        w.index = 2; w.value = counts[2]; w.bound = ROWS;
    } else if (bad == 3) {
        w.op = "talon_grouped_gemm"; w.what = "rows_used";
        w.index = 0; w.value = used; w.bound = CROWS;
    }
    /* a bad count is clamped and a long rows_used cut without checking: same inputs */
    fails = run_pair(name, rg, 1, OP_grouped_gemm, &a, &a, &w, NULL, NULL);
    region_free(&rg[0]);
    cu.cuMemFree(da); cu.cuMemFree(db); cu.cuMemFree(didx); cu.cuMemFree(dused);
    free(ha); free(hb);
    return fails;
}

static void test_grouped_gemm(void **state) {
    int fails = 0;
    (void)state;
    fails += grouped_case("grouped_gemm valid (masked counts 0 .. rows)", 0);
    fails += grouped_case("grouped_gemm masked count above rows", 1);
    fails += grouped_case("grouped_gemm masked count -3", 2);
    fails += grouped_case("grouped_gemm rows_used past the rows", 3);
    if (fails) fail_msg("%d grouped_gemm failures", fails);
}
#endif

/* moe_gemm: Mixtral-like, 2048 tokens, top-2 of 8: w13 gated (TOKEN -> SORTED), w2 with
   router weights (SORTED -> PAIR) */
static int moe_gemm_bench(bench_case *cases) {
    static talon_moe_gemm_args mg[2];
    int64_t t;
    int i;
    int nc = 0;
    const int64_t tk = 2048, topk = 2, e = 8, hidden = 4096, inter = 4096;
    int64_t scap = 0, bcap = 0;
    int32_t *ids = (int32_t *)malloc((size_t)(tk * topk) * 4);
    float *w = (float *)malloc((size_t)(tk * topk) * 4);
    talon_moe_align_block_size_args al;
    CUdeviceptr dids = gpu_alloc((size_t)(tk * topk) * 4), dw = gpu_alloc((size_t)(tk * topk) * 4);
    CUdeviceptr ds, de, dp, h;
    talon_moe_align_block_size_capacity(tk, topk, e, 128, &scap, &bcap);
    for (t = 0; t < tk * topk; t++) {
        ids[t] = (int32_t)((t / topk * 3 + (t % topk) * 5) % e);
        w[t] = 0.5f;
    }
    upload(dids, ids, (size_t)(tk * topk) * 4);
    upload(dw, w, (size_t)(tk * topk) * 4);
    free(ids); free(w);
    ds = gpu_alloc((size_t)scap * 4); de = gpu_alloc((size_t)bcap * 4); dp = gpu_alloc(4);
    memset(&al, 0, sizeof al);
    al.sorted_token_ids = ds; al.expert_ids = de; al.num_tokens_post_padded = dp;
    al.topk_ids = dids; al.tokens = tk; al.k = topk; al.experts = e; al.block_size = 128;
    al.sorted_capacity = scap; al.expert_ids_capacity = bcap;
    if (talon_moe_align_block_size(g.ctx, g.stream, &al) != TALON_SUCCESS) return -1;
    h = gpu_alloc((size_t)scap * inter * 2);
    for (i = 0; i < 2; i++) {
        memset(&mg[i], 0, sizeof mg[i]);
        mg[i].sorted_token_ids = ds; mg[i].expert_ids = de; mg[i].num_tokens_post_padded = dp;
        mg[i].tokens = tk; mg[i].topk = topk; mg[i].experts = e; mg[i].block_size = 128;
        mg[i].sorted_capacity = scap; mg[i].expert_ids_capacity = bcap;
    }
    mg[0].d = h; mg[0].a = bench_fill((size_t)tk * hidden * 2, 10);
    mg[0].b = bench_fill((size_t)e * 2 * inter * hidden * 2, 11);
    mg[0].n = inter; mg[0].k = hidden; mg[0].gated = 1; mg[0].act = TALON_GEMM_ACT_SILU;
    mg[0].a_rows = TALON_MOE_ROWS_TOKEN; mg[0].d_rows = TALON_MOE_ROWS_SORTED;
    mg[1].d = gpu_alloc((size_t)tk * topk * hidden * 2); mg[1].a = h;
    mg[1].b = bench_fill((size_t)e * hidden * inter * 2, 12);
    mg[1].topk_weights = dw; mg[1].n = hidden; mg[1].k = inter;
    mg[1].a_rows = TALON_MOE_ROWS_SORTED; mg[1].d_rows = TALON_MOE_ROWS_PAIR;
    cases[nc].name = "moe_gemm w13 2048 tok top-2/8, TOKEN -> SORTED";
    cases[nc].op = OP_moe_gemm; cases[nc++].args = &mg[0];
    cases[nc].name = "moe_gemm w2 SORTED -> PAIR, router weights";
    cases[nc].op = OP_moe_gemm; cases[nc++].args = &mg[1];
    return nc;
}

static int grouped_gemm_bench(bench_case *cases) { /* none yet */
    (void)cases;
    return 0;
}
#endif
