/* GPU tests of talon_topk (H100/H200): random and adversarial rows in fp32, bf16 and f16,
   sorted and unsorted, every output element compared EXACTLY with the CPU reference
   (tests/topk/ref_topk.h): sorted output must equal the reference index list; unsorted output must
   be the same set; every value must be the input element at its index, bit for bit. Outputs
   and the workspace are poisoned (0xFF bytes) before every launch; guards after the outputs,
   the row padding of the input (NaN, which would rank first if read) and the input itself must
   be unchanged. Also CUDA graph capture with replays on fresh inputs.

   TALON_TEST_QUICK=1 (for compute-sanitizer) keeps every dtype, pattern, mode and path (both
   kernel sequences; the last block's rank among few entries, its bins, and its radix select
   and sort where ties fill a bin; the candidate fallback) on fewer and smaller rows. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gpu.h"
#include "ref.h"
#include "ref_topk.h"
#include "talon.h"

#define GUARD 256 /* bytes after each output that must stay poisoned */
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static talon_ctx *g_ctx;
static CUstream g_stream;
static int g_quick;
static int64_t g_cases, g_elements;

/* ---------------------------------------------------------------- inputs */
enum pattern {
    P_NORMAL,   /* gaussian: candidates of the k-th digit usually fit the workspace */
    P_UNIFORM,  /* [0, 1): one top digit holds 1/8 of a row, the fallback path for long rows */
    P_EQUAL,    /* every value 1.5: the lowest k indices */
    P_FEW,      /* 8 distinct values: many duplicates straddle the k-th value */
    P_NEGINF,   /* every value -inf */
    P_SPECIAL,  /* gaussian with NaNs of both signs, +/-inf and +/-0 sprinkled in */
    P_ZEROS,    /* +0.0 and -0.0 mixed (they tie) with a few -1 */
    P_RAMP,     /* ascending with the index: the sampled path's sample holds the row's largest
                   values in its last run, so fewer than k keys reach its threshold (large k) */
    P_NUM
};
static const char *const pattern_name[P_NUM] = {"normal", "uniform", "all-equal", "8 values",
                                                "all -inf", "NaN/inf/zeros", "+-0", "ramp"};

typedef struct tcase {
    talon_dtype dtype;
    int64_t rows, cols, k, stride; /* stride 0: contiguous */
    int sorted, pattern;
    uint64_t seed;
} tcase;

static const char *dname(talon_dtype t) {
    return t == TALON_DTYPE_F32 ? "f32" : t == TALON_DTYPE_BF16 ? "bf16" : "f16";
}

static float draw(int pattern, uint64_t *s, int64_t i, int64_t cols) {
    float u = ref_unit01(s), v;
    switch (pattern) {
    case P_RAMP: return (float)i / (float)cols * 8.0f - 4.0f;
    case P_UNIFORM: return u;
    case P_EQUAL: return 1.5f;
    case P_FEW: return (float)(int)(u * 8) - 3.0f;
    case P_NEGINF: return -INFINITY;
    case P_ZEROS: return u < 0.45f ? 0.0f : u < 0.9f ? -0.0f : -1.0f;
    default: break;
    }
    v = sqrtf(-2.0f * logf(1.0f - u)) * cosf(6.2831853f * ref_unit01(s)) * 3.0f;
    if (pattern == P_SPECIAL) {
        const float w = ref_unit01(s);
        if (w < 0.01f) return NAN;
        if (w < 0.02f) return -NAN;
        if (w < 0.03f) return INFINITY;
        if (w < 0.04f) return -INFINITY;
        if (w < 0.05f) return 0.0f;
        if (w < 0.06f) return -0.0f;
    }
    return v;
}

typedef struct job {
    tcase c;
    int64_t ld, esize, in_bytes, val_bytes, idx_bytes, ws_bytes;
    float *x;            /* [rows, cols], the exact values */
    unsigned char *host; /* the input as uploaded (with padding) */
    int32_t *ref;        /* [rows, k], sorted reference */
    CUdeviceptr in, vals, idx, ws;
} job;

/* Element bits of x in the case's dtype. */
static uint32_t bits_of(talon_dtype t, float x) {
    uint32_t u;
    if (t != TALON_DTYPE_F32) return ref_from_f32(t, x);
    memcpy(&u, &x, 4);
    return u;
}

static uint32_t elem_at(const job *j, const unsigned char *base, int64_t i) {
    uint32_t u = 0;
    memcpy(&u, base + i * j->esize, (size_t)j->esize);
    return u;
}

static void fill(job *j, uint64_t seed) {
    const tcase *c = &j->c;
    const float pad = NAN;
    uint64_t s = seed;
    int64_t r, i;
    for (r = 0; r < c->rows; r++)
        for (i = 0; i < j->ld; i++) {
            const float v = i < c->cols ? draw(c->pattern, &s, i, c->cols) : pad;
            const uint32_t b = bits_of(c->dtype, v);
            float q = v;
            if (c->dtype != TALON_DTYPE_F32) q = ref_to_f32(c->dtype, (uint16_t)b);
            memcpy(j->host + (r * j->ld + i) * j->esize, &b, (size_t)j->esize);
            if (i < c->cols) j->x[r * c->cols + i] = q;
        }
    for (r = 0; r < c->rows; r++)
        ref_topk_row(j->x + r * c->cols, c->cols, c->k, j->ref + r * c->k);
}

static int job_prepare(job *j, const tcase *c) {
    memset(j, 0, sizeof *j);
    j->c = *c;
    j->ld = c->stride ? c->stride : c->cols;
    j->esize = c->dtype == TALON_DTYPE_F32 ? 4 : 2;
    j->in_bytes = c->rows * j->ld * j->esize;
    j->val_bytes = c->rows * c->k * j->esize + GUARD;
    j->idx_bytes = c->rows * c->k * 4 + GUARD;
    {
        talon_topk_args a;
        memset(&a, 0, sizeof a);
        a.rows = c->rows; a.cols = c->cols;
        if (talon_topk_workspace_size(g_ctx, &a, &j->ws_bytes) != TALON_SUCCESS) return -1;
    }
    j->x = malloc((size_t)(c->rows * c->cols) * sizeof(float));
    j->host = malloc((size_t)j->in_bytes);
    j->ref = malloc((size_t)(c->rows * c->k) * sizeof(int32_t));
    if (!j->x || !j->host || !j->ref || j->ws_bytes <= 0) return -1;
    if (cu.cuMemAlloc(&j->in, (size_t)j->in_bytes) || cu.cuMemAlloc(&j->vals, (size_t)j->val_bytes) ||
        cu.cuMemAlloc(&j->idx, (size_t)j->idx_bytes) || cu.cuMemAlloc(&j->ws, (size_t)j->ws_bytes))
        return -1;
    return 0;
}

/* New inputs from seed; outputs and workspace poisoned. */
static int job_upload(job *j, uint64_t seed) {
    fill(j, seed);
    if (cu.cuMemcpyHtoD(j->in, j->host, (size_t)j->in_bytes) ||
        cu.cuMemsetD8(j->vals, 0xFF, (size_t)j->val_bytes) ||
        cu.cuMemsetD8(j->idx, 0xFF, (size_t)j->idx_bytes) ||
        cu.cuMemsetD8(j->ws, 0xFF, (size_t)j->ws_bytes))
        return -1;
    return 0;
}

static talon_status job_launch(const job *j, CUstream s) {
    talon_topk_args a;
    memset(&a, 0, sizeof a);
    a.out_values = j->vals; a.out_indices = j->idx; a.in = j->in;
    a.workspace = j->ws; a.workspace_bytes = j->ws_bytes;
    a.rows = j->c.rows; a.cols = j->c.cols; a.k = j->c.k; a.in_stride = j->c.stride;
    a.sorted = j->c.sorted; a.dtype = j->c.dtype;
    return talon_topk(g_ctx, s, &a);
}

static void job_free(job *j) {
    if (j->in) cu.cuMemFree(j->in);
    if (j->vals) cu.cuMemFree(j->vals);
    if (j->idx) cu.cuMemFree(j->idx);
    if (j->ws) cu.cuMemFree(j->ws);
    free(j->x); free(j->host); free(j->ref);
}

static int cmp_i32(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void describe(const tcase *c, char *buf, size_t n) {
    snprintf(buf, n, "%s rows=%lld cols=%lld k=%lld stride=%lld %s %s", dname(c->dtype),
             (long long)c->rows, (long long)c->cols, (long long)c->k, (long long)c->stride,
             c->sorted ? "sorted" : "unsorted", pattern_name[c->pattern]);
}

/* Downloads and compares everything; 0 on pass, else prints the first problem. */
static int job_check(job *j, int64_t *elements) {
    const tcase *c = &j->c;
    const int64_t n = c->rows * c->k;
    unsigned char *vals = malloc((size_t)j->val_bytes), *in = malloc((size_t)j->in_bytes);
    int32_t *idx = malloc((size_t)j->idx_bytes), *a = malloc((size_t)c->k * 4),
            *b = malloc((size_t)c->k * 4);
    char desc[160], what[256] = "";
    int64_t r, t, bad = 0;
    describe(c, desc, sizeof desc);
    if (!vals || !in || !idx || !a || !b) abort();
    if (cu.cuMemcpyDtoH(vals, j->vals, (size_t)j->val_bytes) ||
        cu.cuMemcpyDtoH(idx, j->idx, (size_t)j->idx_bytes) ||
        cu.cuMemcpyDtoH(in, j->in, (size_t)j->in_bytes)) {
        snprintf(what, sizeof what, "download failed");
        bad = 1;
    }
    if (!bad && memcmp(in, j->host, (size_t)j->in_bytes)) {
        snprintf(what, sizeof what, "the input was modified");
        bad++;
    }
    for (t = 0; !bad && t < GUARD; t++)
        if (vals[n * j->esize + t] != 0xFF || ((unsigned char *)idx)[n * 4 + t] != 0xFF) {
            snprintf(what, sizeof what, "guard byte %lld after the outputs written", (long long)t);
            bad++;
        }
    for (r = 0; r < c->rows; r++) {
        const int32_t *got = idx + r * c->k, *want = j->ref + r * c->k;
        for (t = 0; t < c->k; t++) {
            const int32_t i = got[t];
            if (i < 0 || i >= c->cols) {
                if (!bad++) snprintf(what, sizeof what, "row %lld [%lld]: index %d out of range",
                                     (long long)r, (long long)t, i);
                continue;
            }
            if (elem_at(j, vals, r * c->k + t) != elem_at(j, j->host, r * j->ld + i) && !bad++)
                snprintf(what, sizeof what, "row %lld [%lld]: value bits 0x%x, input[%d] is 0x%x",
                         (long long)r, (long long)t, elem_at(j, vals, r * c->k + t), i,
                         elem_at(j, j->host, r * j->ld + i));
        }
        if (c->sorted) {
            for (t = 0; t < c->k; t++)
                if (got[t] != want[t] && !bad++)
                    snprintf(what, sizeof what, "row %lld [%lld]: index %d (%g), expected %d (%g)",
                             (long long)r, (long long)t, got[t],
                             got[t] >= 0 && got[t] < c->cols ? (double)j->x[r * c->cols + got[t]] : 0.0,
                             want[t], (double)j->x[r * c->cols + want[t]]);
        } else {
            memcpy(a, got, (size_t)c->k * 4);
            memcpy(b, want, (size_t)c->k * 4);
            qsort(a, (size_t)c->k, 4, cmp_i32);
            qsort(b, (size_t)c->k, 4, cmp_i32);
            for (t = 0; t < c->k; t++)
                if (a[t] != b[t] && !bad++)
                    snprintf(what, sizeof what, "row %lld: index sets differ, %lld-th smallest %d "
                             "vs expected %d", (long long)r, (long long)t, a[t], b[t]);
        }
    }
    *elements += 2 * n;
    if (bad) print_error("FAILED %s: %lld mismatches, first: %s\n", desc, (long long)bad, what);
    free(vals); free(in); free(idx); free(a); free(b);
    return bad ? -1 : 0;
}

/* ---------------------------------------------------------------- tests */
typedef struct tally { const char *name; int64_t cases, failures, elements; struct timespec t0; } tally;

static void tally_start(tally *t, const char *name) {
    memset(t, 0, sizeof *t);
    t->name = name;
    clock_gettime(CLOCK_MONOTONIC, &t->t0);
}

static void tally_end(tally *t) {
    print_message("%s: %lld cases, %lld elements (indices + values) checked exactly, "
                  "%lld failed, %.1f s\n", t->name, (long long)t->cases, (long long)t->elements,
                  (long long)t->failures,
                  gpu_seconds_since(&t->t0));
    g_cases += t->cases;
    g_elements += t->elements;
    if (t->failures) fail();
}

static void run_case(tally *t, const tcase *c) {
    job j;
    char desc[160];
    int rc = job_prepare(&j, c);
    talon_status s = TALON_SUCCESS;
    CUresult e = CUDA_SUCCESS;
    t->cases++;
    if (!rc) rc = job_upload(&j, c->seed);
    if (!rc && (s = job_launch(&j, g_stream)) != TALON_SUCCESS) rc = -1;
    if (!rc && (e = cu.cuStreamSynchronize(g_stream)) != CUDA_SUCCESS) rc = -1;
    if (rc) {
        describe(c, desc, sizeof desc);
        print_error("FAILED %s: setup/launch: %s %s\n", desc,
                    s ? talon_last_error() : "", e ? gpu_error(e) : "");
    } else {
        rc = job_check(&j, &t->elements);
    }
    if (rc) t->failures++;
    job_free(&j);
    if (e != CUDA_SUCCESS) fail(); /* a sticky error ends the program's usefulness */
}

typedef struct shape { int64_t rows, cols, k, stride; } shape;
/* Odd and round lengths, k = 1, k = V, V = 1, the benchmark shapes, the limits. Both kernel
   sequences: the chunk path up to rows x ceil(cols / 4096) = 2048 (64 x 128256 is the last),
   the sampled path beyond (65 x 128256, 1024 x 8193, 48 x 262144), whose chunks can exceed
   32768 elements (100 x 262144: 7 of 37504; 396 x 40000: the whole row). Strides that are not
   a multiple of 4 elements mix rows with 16-byte and 4-byte loads. */
static const shape shapes_full[] = {
    {1, 1, 1, 0},         {3, 7, 1, 0},        {3, 7, 7, 9},          {5, 111, 50, 0},
    {4, 500, 500, 503},   {2, 500, 1, 0},      {7, 4096, 1024, 0},    {2, 4097, 3, 4100},
    {1024, 111, 5, 0},    {1, 128256, 50, 0},  {64, 128256, 50, 0},   {2, 128256, 1024, 0},
    {3, 100003, 777, 100005}, {1, 262144, 1024, 0}, {2, 262144, 1, 0}, {4, 262144, 1024, 262147},
    {1, 1024, 1024, 0},   {4, 128256, 50, 0},  {5, 128256, 50, 0},   {3, 262144, 1024, 0},
    {128, 4096, 1024, 0}, {129, 4096, 100, 4099}, {64, 128256, 1024, 0}, {65, 128256, 50, 0},
    {1024, 8193, 100, 8197}, {48, 262144, 1024, 0}, {48, 262144, 1, 262147},
    {100, 262144, 1024, 0}, {396, 40000, 64, 0},
};
static const shape shapes_quick[] = {
    {1, 1, 1, 0},   {3, 7, 7, 9},       {5, 111, 50, 0},  {2, 500, 500, 503},
    {2, 4097, 3, 4100}, {1, 128256, 50, 0}, {1, 100003, 777, 100005}, {1, 262144, 1024, 0},
    {5, 128256, 50, 0}, {129, 500, 17, 0}, {1024, 8193, 5, 0},
};
/* Adversarial patterns on fewer shapes (the reference sorts every row); the last three take
   the sampled path, where all-equal, 8 values and +-0 overflow the candidates and ramp falls
   short of k (each row then re-read by one block). */
static const shape shapes_adv[] = {
    {1, 1, 1, 0}, {3, 7, 3, 0}, {2, 500, 250, 0}, {2, 4097, 1024, 0}, {2, 100003, 777, 0},
    {1, 262144, 1024, 0}, {1, 128256, 50, 128259},
    {1, 4000, 1000, 0}, /* all-equal: one block stages 3072 candidates, the rest go direct */
    {9, 100003, 777, 0}, {200, 500, 250, 0}, {1024, 8193, 1000, 0}, {90, 100003, 777, 0},
    {34, 262144, 1024, 262145},
};

static void test_dtype(void **state) {
    const talon_dtype dt = (talon_dtype)(intptr_t)*state;
    const shape *sh = g_quick ? shapes_quick : shapes_full;
    const int nsh = g_quick ? COUNT(shapes_quick) : COUNT(shapes_full);
    char name[32];
    tally t;
    int i, p, sorted;
    snprintf(name, sizeof name, "topk_%s", dname(dt));
    tally_start(&t, name);
    for (i = 0; i < nsh; i++)
        for (sorted = 0; sorted < 2; sorted++) {
            tcase c = {dt, sh[i].rows, sh[i].cols, sh[i].k, sh[i].stride, sorted, P_NORMAL,
                       0x70C0 + (uint64_t)i * 131 + (uint64_t)dt * 7 + (uint64_t)sorted};
            run_case(&t, &c);
        }
    for (p = P_UNIFORM; p < P_NUM; p++)
        for (i = 0; i < COUNT(shapes_adv); i++) {
            tcase c = {dt, shapes_adv[i].rows, shapes_adv[i].cols, shapes_adv[i].k,
                       shapes_adv[i].stride, (i + p) % 2, p,
                       0xAD7 + (uint64_t)i * 977 + (uint64_t)p * 31 + (uint64_t)dt};
            if (g_quick && shapes_adv[i].cols > 100003) continue;
            run_case(&t, &c);
        }
    tally_end(&t);
}

/* Captured once, replayed on fresh inputs with the outputs and the workspace re-poisoned. */
static void test_graph(void **state) {
    static const tcase cases[] = {
        {TALON_DTYPE_F32, 3, 128256, 50, 0, 1, P_NORMAL, 1},
        {TALON_DTYPE_BF16, 2, 100003, 777, 0, 0, P_UNIFORM, 2},
        {TALON_DTYPE_F16, 4, 500, 17, 501, 1, P_FEW, 3},
        {TALON_DTYPE_F32, 90, 100003, 50, 0, 0, P_NORMAL, 4}, /* sampled path */
        {TALON_DTYPE_F32, 34, 262144, 1024, 0, 1, P_RAMP, 5}, /* sampled, short of k */
    };
    tally t;
    int i, rep;
    (void)state;
    tally_start(&t, "topk_graph_capture_replay");
    for (i = 0; i < COUNT(cases); i++) {
        job j;
        CUgraph graph = NULL;
        CUgraphExec exec = NULL;
        assert_int_equal(job_prepare(&j, &cases[i]), 0);
        assert_int_equal(cu.cuStreamBeginCapture(g_stream, CU_STREAM_CAPTURE_MODE_GLOBAL),
                         CUDA_SUCCESS);
        assert_int_equal(job_launch(&j, g_stream), TALON_SUCCESS);
        assert_int_equal(cu.cuStreamEndCapture(g_stream, &graph), CUDA_SUCCESS);
        assert_int_equal(cu.cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
        for (rep = 0; rep < 3; rep++) {
            t.cases++;
            assert_int_equal(job_upload(&j, cases[i].seed * 1000 + (uint64_t)rep), 0);
            assert_int_equal(cu.cuGraphLaunch(exec, g_stream), CUDA_SUCCESS);
            assert_int_equal(cu.cuStreamSynchronize(g_stream), CUDA_SUCCESS);
            if (job_check(&j, &t.elements)) t.failures++;
        }
        cu.cuGraphExecDestroy(exec);
        cu.cuGraphDestroy(graph);
        job_free(&j);
    }
    tally_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_prestate(test_dtype, (void *)(intptr_t)TALON_DTYPE_F32),
        cmocka_unit_test_prestate(test_dtype, (void *)(intptr_t)TALON_DTYPE_BF16),
        cmocka_unit_test_prestate(test_dtype, (void *)(intptr_t)TALON_DTYPE_F16),
        cmocka_unit_test(test_graph),
    };
    gpu_test t;
    int failed;
    if (gpu_test_begin(&t, "test_gpu_topk", CU_STREAM_DEFAULT)) return 1;
    g_ctx = t.ctx;
    g_stream = t.stream;
    g_quick = t.quick;
    failed = cmocka_run_group_tests_name("talon_topk GPU", tests, NULL, NULL);
    return gpu_test_end(&t, " exactly", (long long)g_cases, (long long)g_elements, failed);
}
