/* The topk family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_TOPK_H
#define TALON_TESTS_CASES_TOPK_H

#define TOPK_TEST_OPS(X) X(topk, topk)
/* bench/shim.c: the fields of its args structs, in talon.h's order (kinds: bench/shim.c) */
#define TOPK_BENCH_STRUCTS(S, F) \
    S(talon_topk_args, \
      F(out_values, PTR) F(out_indices, PTR) F(in, PTR) F(workspace, PTR) \
      F(workspace_bytes, I64) F(rows, I64) F(cols, I64) F(k, I64) F(in_stride, I64) \
      F(sorted, I32) F(dtype, ENUM))

#define TOPK_WORKSPACE_OPS(X) X(topk, topk)

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void topk_valid_args(talon_topk_args *a) {
    a->out_values = 1 * GB; a->out_indices = 2 * GB; a->in = 3 * GB;
    a->workspace = 4 * GB; a->workspace_bytes = 1 << 30;
    a->rows = 256; a->cols = 131072; a->k = 50; a->sorted = 1;
    a->dtype = TALON_DTYPE_F32;
}
#endif

#ifdef TALON_TESTS_OP_CASES_H /* oc_case's params */
typedef struct { int64_t rows, cols, k, stride; int sorted; } topk_params;
#define TOPK_OC_PARAMS topk_params topk;
#endif

#endif

#ifdef OC_FAMILY_CASES /* op_cases.h */
#include "ref_topk.h"

static void topk_random(oc_case *c, uint64_t *s, int big) {
    const int r = (int)oc_ri(s, 0, 2);
    const int64_t max_elems = big ? 1500000 : 150000;
    c->dt = r == 0 ? TALON_DTYPE_F32 : r == 1 ? TALON_DTYPE_BF16 : TALON_DTYPE_F16;
    c->p.topk.cols = oc_chance(s, 40) ? oc_len(s, 1, 4096)
                     : oc_chance(s, 70) || !big ? oc_ri(s, 4096, 40000) : oc_ri(s, 40000, 262144);
    c->p.topk.rows = oc_len(s, 1, big ? 256 : 16);
    while (c->p.topk.rows > 1 && c->p.topk.rows * c->p.topk.cols > max_elems)
        c->p.topk.rows = (c->p.topk.rows + 1) / 2;
    {
        const int64_t kmax = c->p.topk.cols < 1024 ? c->p.topk.cols : 1024;
        c->p.topk.k = oc_chance(s, 50) ? oc_len(s, 1, kmax) : oc_ri(s, 1, kmax < 64 ? kmax : 64);
    }
    if (oc_chance(s, 25)) c->p.topk.stride = c->p.topk.cols + oc_ri(s, 1, 5);
    c->p.topk.sorted = oc_chance(s, 50);
}

static int topk_describe(const oc_case *c, char *buf, size_t n, const char *name,
                         const char *dt, unsigned long long seed) {
    return snprintf(buf, n, "%s %s rows %lld cols %lld k %lld stride %lld %s seed %llx", name,
                    dt, (long long)c->p.topk.rows, (long long)c->p.topk.cols,
                    (long long)c->p.topk.k, (long long)c->p.topk.stride,
                    c->p.topk.sorted ? "sorted" : "unsorted", seed);
}

static int topk_build(oc_job *j, talon_ctx *ctx) {
    const oc_case *c = &j->c;
    const int esize = c->dt == TALON_DTYPE_F32 ? 4 : 2;
    const int64_t rows = c->p.topk.rows, cols = c->p.topk.cols, k = c->p.topk.k;
    const int64_t ld = c->p.topk.stride ? c->p.topk.stride : cols;
    talon_topk_args a;
    int64_t ws = 0, r, i;
    uint64_t s = c->seed;
    const int pattern = (int)(ref_next64(&s) % 3); /* spread, 8 values (ties), [0, 1) */
    memset(&a, 0, sizeof a);
    a.rows = rows;
    a.cols = cols;
    if (talon_topk_workspace_size(ctx, &a, &ws) != TALON_SUCCESS) return -1;
    if (oc_add(j, "in", OC_IN, esize, (rows - 1) * ld + cols, 0) != 0 ||
        oc_add(j, "out_values", OC_OUT, esize, rows * k, 0) != 1 ||
        oc_add(j, "out_indices", OC_OUT, 4, rows * k, 0) != 2 ||
        oc_add(j, "workspace", OC_WS, 1, ws, 0) != 3)
        return -1;
    for (r = 0; r < rows; r++) /* padding NaN */
        for (i = 0; i < cols; i++) {
            const float u = ref_unit01(&s);
            const float v = pattern == 0 ? 6.0f * (u + ref_unit01(&s) - 1.0f)
                            : pattern == 1 ? (float)(int)(u * 8.0f) - 3.0f : u;
            if (esize == 4) oc_setf(oc_img(j, 0), r * ld + i, v);
            else oc_set16(oc_img(j, 0), r * ld + i, oc_bits(c->dt, v));
        }
    return 0;
}

static void topk_args(const oc_job *j, const oc_dev *d, op_args *a) {
    const oc_case *c = &j->c;
    a->topk.out_values = P(1); a->topk.out_indices = P(2); a->topk.in = P(0);
    a->topk.workspace = P(3); a->topk.workspace_bytes = (int64_t)j->b[3].used;
    a->topk.rows = c->p.topk.rows; a->topk.cols = c->p.topk.cols; a->topk.k = c->p.topk.k;
    a->topk.in_stride = c->p.topk.stride; a->topk.sorted = c->p.topk.sorted;
    a->topk.dtype = c->dt;
}

static int oc_cmp_i32(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void topk_check(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget) {
    const oc_case *c = &j->c;
    const int es = c->dt == TALON_DTYPE_F32 ? 4 : 2;
    const int64_t rows = c->p.topk.rows, cols = c->p.topk.cols, k = c->p.topk.k;
    const int64_t ld = c->p.topk.stride ? c->p.topk.stride : cols;
    const uint8_t *in = oc_img(j, 0);
    float *x = (float *)malloc((size_t)cols * sizeof(float));
    int32_t *ref = (int32_t *)malloc((size_t)k * 3 * sizeof(int32_t)), *a = ref + k, *b = a + k;
    int64_t r, t;
    (void)budget;
    if (!x || !ref) { oc_fail(st, "out of host memory"); goto done; }
    for (r = 0; r < rows; r++) {
        for (t = 0; t < cols; t++)
            x[t] = es == 4 ? oc_getf(in, r * ld + t) : REF_TO_F32(c->dt, oc_get16(in, r * ld + t));
        ref_topk_row(x, cols, k, ref);
        for (t = 0; t < k; t++) { /* values: the input element at the index, bit for bit */
            const int32_t id = oc_geti(img[2], r * k + t);
            st->elements += 2;
            if (id < 0 || id >= cols) {
                oc_fail(st, "out_indices[%lld, %lld] = %d is outside the row", (long long)r, (long long)t, id);
                continue;
            }
            if (es == 4 ? oc_get32(img[1], r * k + t) != oc_get32(in, r * ld + id)
                        : oc_get16(img[1], r * k + t) != oc_get16(in, r * ld + id))
                oc_fail(st, "out_values[%lld, %lld] is not input[%d] bit for bit", (long long)r,
                        (long long)t, id);
            if (c->p.topk.sorted && id != ref[t])
                oc_fail(st, "out_indices[%lld, %lld] = %d (%g), reference %d (%g)", (long long)r,
                        (long long)t, id, (double)x[id], ref[t], (double)x[ref[t]]);
            a[t] = id;
            b[t] = ref[t];
        }
        if (!c->p.topk.sorted) { /* the same set, in any order */
            qsort(a, (size_t)k, sizeof *a, oc_cmp_i32);
            qsort(b, (size_t)k, sizeof *b, oc_cmp_i32);
            for (t = 0; t < k; t++)
                if (a[t] != b[t]) {
                    oc_fail(st, "row %lld: the index set differs from the reference's (its "
                            "%lld-th smallest %d, reference %d)", (long long)r, (long long)t, a[t], b[t]);
                    break;
                }
        }
    }
done:
    free(x); free(ref);
}

/* oc_canon: talon_topk with sorted = 0 returns each row's k entries
   "in an unspecified order (it may differ between calls)": its (index, value) pairs are
   sorted by index (the values are copies of the input at the index, so the pairs sort
   together). */
static void topk_canon(const oc_job *j, uint8_t *const *img) {
    const oc_case *c = &j->c;
    if (!c->p.topk.sorted) {
        const int es = c->dt == TALON_DTYPE_F32 ? 4 : 2;
        const int64_t k = c->p.topk.k;
        int64_t r, a, b;
        for (r = 0; r < c->p.topk.rows; r++) { /* insertion sort: k <= 1024 */
            uint8_t *vals = img[1] + r * k * es, *idx = img[2] + r * k * 4;
            for (a = 1; a < k; a++) {
                uint8_t iv[4], vv[4];
                memcpy(iv, idx + a * 4, 4);
                memcpy(vv, vals + a * es, (size_t)es);
                for (b = a; b > 0 && oc_geti(idx, b - 1) > oc_geti(iv, 0); b--) {
                    memcpy(idx + b * 4, idx + (b - 1) * 4, 4);
                    memcpy(vals + b * es, vals + (b - 1) * es, (size_t)es);
                }
                memcpy(idx + b * 4, iv, 4);
                memcpy(vals + b * es, vv, (size_t)es);
            }
        }
    }
}

static const oc_op topk_oc = {topk_random, topk_build, topk_args,
                              topk_check, topk_describe, topk_canon};
#endif
