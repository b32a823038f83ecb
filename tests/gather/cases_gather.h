/* The gather family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_GATHER_H
#define TALON_TESTS_CASES_GATHER_H

#define GATHER_TEST_OPS(X) X(gather_rows, gather)
/* bench/shim.c: the fields of its args structs, in talon.h's order (kinds: bench/shim.c) */
#define GATHER_BENCH_STRUCTS(S, F) \
    S(talon_gather_rows_args, \
      F(out, PTR) F(in, PTR) F(indices, PTR) F(rows, I64) F(cols, I64) F(in_rows, I64) \
      F(out_stride, I64) F(in_stride, I64) F(dtype, ENUM) F(index_dtype, ENUM))

#define GATHER_CHECKED_OPS(X) X(gather_rows, talon__gather_params, test_gather_rows)

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void gather_rows_valid_args(talon_gather_rows_args *a) {
    a->out = 1 * GB; a->in = 2 * GB; a->indices = 3 * GB;
    a->rows = 4; a->cols = 4096; a->in_rows = 128256;
}
#endif

#ifdef TALON_TESTS_OP_CASES_H /* oc_case's params */
typedef struct { int64_t rows, cols, in_rows, in_stride, out_stride, bad_every; int esize, idx64; } gather_params;
#define GATHER_OC_PARAMS gather_params gather;
#endif

#endif

#ifdef OC_FAMILY_CASES /* op_cases.h */
static void gather_random(oc_case *c, uint64_t *s, int big) {
    const int r = (int)oc_ri(s, 0, 3);
    const int64_t max_bytes = big ? 64 << 20 : 4 << 20;
    c->p.gather.esize = r < 2 ? 2 : r == 2 ? 4 : 1;
    c->dt = r == 2 ? TALON_DTYPE_F32 : r == 3 ? TALON_DTYPE_FP8_E4M3 : c->dt;
    c->p.gather.idx64 = oc_chance(s, 50);
    c->p.gather.rows = oc_len(s, 1, big ? 4096 : 500);
    c->p.gather.cols = oc_chance(s, 50) ? oc_len(s, 1, 5000) : 16 / c->p.gather.esize * oc_len(s, 1, 512);
    c->p.gather.in_rows = oc_len(s, 1, big ? 100000 : 5000);
    while (c->p.gather.in_rows > 1 && c->p.gather.in_rows * c->p.gather.cols * c->p.gather.esize > max_bytes)
        c->p.gather.in_rows = (c->p.gather.in_rows + 1) / 2;
    while (c->p.gather.rows > 1 && c->p.gather.rows * c->p.gather.cols * c->p.gather.esize > max_bytes)
        c->p.gather.rows = (c->p.gather.rows + 1) / 2;
    if (oc_chance(s, 25)) c->p.gather.in_stride = c->p.gather.cols + oc_pad(s);
    if (oc_chance(s, 25)) c->p.gather.out_stride = c->p.gather.cols + oc_pad(s);
    c->p.gather.bad_every = oc_chance(s, 30) ? oc_ri(s, 2, 9) : 0;
}

static int gather_describe(const oc_case *c, char *buf, size_t n, const char *name,
                           const char *dt, unsigned long long seed) {
    return snprintf(buf, n, "%s %s rows %lld cols %lld in_rows %lld strides %lld/%lld %s "
                    "bad_every %lld seed %llx", name, dt, (long long)c->p.gather.rows,
                    (long long)c->p.gather.cols, (long long)c->p.gather.in_rows,
                    (long long)c->p.gather.out_stride, (long long)c->p.gather.in_stride,
                    c->p.gather.idx64 ? "int64" : "int32", (long long)c->p.gather.bad_every,
                    seed);
}

static int gather_build(oc_job *j, talon_ctx *ctx) {
    const oc_case *c = &j->c;
    const int es = c->p.gather.esize, ib = c->p.gather.idx64 ? 8 : 4;
    const int64_t rows = c->p.gather.rows, cols = c->p.gather.cols, in_rows = c->p.gather.in_rows;
    const int64_t is = c->p.gather.in_stride ? c->p.gather.in_stride : cols;
    const int64_t os = c->p.gather.out_stride ? c->p.gather.out_stride : cols;
    uint64_t s = c->seed;
    int64_t i;
    (void)ctx;
    if (oc_add(j, "in", OC_IN, es, (in_rows - 1) * is + cols, 0) != 0 ||
        oc_add(j, "indices", OC_IN, ib, rows, 0) != 1 ||
        oc_add(j, "out", OC_OUT, es, (rows - 1) * os + cols, 0) != 2)
        return -1;
    for (i = 0; i < (int64_t)j->b[0].used; i++) j->b[0].init[i] = (uint8_t)(ref_next64(&s) >> 32);
    for (i = 0; i < rows; i++) {
        static const int64_t bad[] = {-1, -2, INT32_MAX, INT32_MIN, INT64_MIN, INT64_MAX, -7};
        const uint64_t x = ref_next64(&s);
        int64_t v = (int64_t)(x % (uint64_t)in_rows);
        if (c->p.gather.bad_every && i % c->p.gather.bad_every == c->p.gather.bad_every - 1) {
            const int b = (int)((x >> 7) % 9);
            v = b < 7 ? bad[b] : b == 7 ? in_rows : in_rows + 1; /* read as zero rows */
            if (ib == 4 && (v > INT32_MAX || v < INT32_MIN)) v = -7;
        }
        if (ib == 8) oc_setl(oc_img(j, 1), i, v);
        else oc_seti(oc_img(j, 1), i, (int32_t)v);
    }
    return 0;
}

static void gather_args(const oc_job *j, const oc_dev *d, op_args *a) {
    const oc_case *c = &j->c;
    a->gather.out = P(2); a->gather.in = P(0); a->gather.indices = P(1);
    a->gather.rows = c->p.gather.rows; a->gather.cols = c->p.gather.cols;
    a->gather.in_rows = c->p.gather.in_rows; a->gather.out_stride = c->p.gather.out_stride;
    a->gather.in_stride = c->p.gather.in_stride; a->gather.dtype = c->dt;
    a->gather.index_dtype = c->p.gather.idx64 ? TALON_INDEX_I64 : TALON_INDEX_I32;
}

static void gather_check(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget) {
    const oc_case *c = &j->c;
    const int es = c->p.gather.esize;
    const int64_t rows = c->p.gather.rows, cols = c->p.gather.cols, in_rows = c->p.gather.in_rows;
    const int64_t is = c->p.gather.in_stride ? c->p.gather.in_stride : cols;
    const int64_t os = c->p.gather.out_stride ? c->p.gather.out_stride : cols;
    int64_t r;
    (void)budget;
    for (r = 0; r < rows; r++) {
        const int64_t src = c->p.gather.idx64 ? oc_getl(oc_img(j, 1), r) : oc_geti(oc_img(j, 1), r);
        const uint8_t *got = img[2] + r * os * es;
        st->elements += cols;
        if (src >= 0 && src < in_rows) {
            if (memcmp(got, oc_img(j, 0) + src * is * es, (size_t)(cols * es)))
                oc_fail(st, "out row %lld differs from in row %lld", (long long)r, (long long)src);
        } else {
            int64_t i;
            for (i = 0; i < cols * es; i++)
                if (got[i]) {
                    oc_fail(st, "out row %lld (index %lld, outside the table) is not zeros",
                            (long long)r, (long long)src);
                    break;
                }
        }
    }
    oc_check_outside(st, j, 2, img[2], rows, cols, os);
}

static const oc_op gather_rows_oc = {gather_random, gather_build, gather_args,
                                     gather_check, gather_describe, NULL};
#endif

#ifdef CHECKED_FAMILY_CASES /* test_gpu_checked.c */
#ifndef CHECKED_BASELINE
static int gather_case(const char *name, int64_t cols, int idx64, int64_t bad_r, int64_t bad_v) {
    enum { ROWS = 40, IN_ROWS = 100 };
    uint16_t *in = random_16(TALON_DTYPE_BF16, (size_t)(IN_ROWS * cols), 31, 1.0f);
    int64_t idx[ROWS];
    int32_t idx32[ROWS];
    region rg[1];
    CUdeviceptr din = gpu_alloc((size_t)(IN_ROWS * cols * 2)), didx = gpu_alloc(ROWS * 8);
    talon_gather_rows_args a;
    want_report w = {NULL, NULL, 0, 0, 0, NULL};
    int64_t r;
    int fails;
    for (r = 0; r < ROWS; r++) idx[r] = (r * 13 + 1) % IN_ROWS;
    if (bad_r >= 0) idx[bad_r] = bad_v;
    for (r = 0; r < ROWS; r++) idx32[r] = (int32_t)idx[r];
    upload(din, in, (size_t)(IN_ROWS * cols * 2));
    upload(didx, idx64 ? (const void *)idx : (const void *)idx32, idx64 ? ROWS * 8 : ROWS * 4);
    rg[0] = region_new((size_t)(ROWS * cols * 2), GUARD, NULL);
    memset(&a, 0, sizeof a);
    a.out = rg[0].p; a.in = din; a.indices = didx; a.rows = ROWS; a.cols = cols;
    a.in_rows = IN_ROWS; a.index_dtype = idx64 ? TALON_INDEX_I64 : TALON_INDEX_I32;
    if (bad_r >= 0) {
        w.op = "talon_gather_rows"; w.what = "indices";
        w.index = bad_r; w.value = bad_v; w.bound = IN_ROWS;
    }
    fails = run_pair(name, rg, 1, OP_gather_rows, &a, &a, &w, NULL, NULL);
    region_free(&rg[0]);
    cu.cuMemFree(din); cu.cuMemFree(didx);
    free(in);
    return fails;
}

static void test_gather_rows(void **state) {
    int fails = 0;
    (void)state;
    fails += gather_case("gather valid", 256, 0, -1, 0);
    fails += gather_case("gather index = in_rows (16-byte path)", 256, 0, 17, 100);
    fails += gather_case("gather index -1 (int64, element-wise)", 7, 1, 3, -1);
    fails += gather_case("gather index INT64_MIN", 256, 1, 39, INT64_MIN);
    if (fails) fail_msg("%d gather failures", fails);
}
#endif

/* gather: 4096 embedding rows of 4096 */
static int gather_rows_bench(bench_case *cases) {
    enum { TOK = 4096 };
    static talon_gather_rows_args ga;
    int64_t t;
    int nc = 0;
    int32_t *idx = (int32_t *)malloc(TOK * 4);
    CUdeviceptr di = gpu_alloc(TOK * 4);
    for (t = 0; t < TOK; t++) idx[t] = (int32_t)((t * 7919) % 32000);
    upload(di, idx, TOK * 4);
    free(idx);
    memset(&ga, 0, sizeof ga);
    ga.out = gpu_alloc((size_t)TOK * 4096 * 2); ga.in = bench_fill((size_t)32000 * 4096 * 2, 5);
    ga.indices = di; ga.rows = TOK; ga.cols = 4096; ga.in_rows = 32000;
    cases[nc].name = "gather_rows 4096 x 4096 bf16 of 32000"; cases[nc].op = OP_gather_rows; cases[nc++].args = &ga;
    return nc;
}
#endif
