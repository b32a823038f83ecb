/* The GPU test program of the ops that tests/common/opcheck.h checks, for one family's ops
   (tests/norm/test_gpu_norm.c, tests/act/test_gpu_act.c call opcheck_tests_main with theirs;
   included once per program, so everything here is static). On an H100/H200: every op x dtype
   over a grid of shapes and layouts, every output element against the fp64 CPU reference
   (tests/common/opcheck.h), plus in-place use, several streams at once, CUDA graph capture and
   replay, capture without preload, and lazy loading from several threads, each over the
   program's ops. One cmocka test per op x dtype; a failing case is printed with its shape,
   strides, offset, worst error and first mismatch.

   TALON_TEST_QUICK=1 (used under compute-sanitizer) shrinks the shape grid; every op, dtype,
   layout and graph capture is still covered. OPCHECK_THREADS=n caps the CPU threads used for
   the reference. */
#ifndef TALON_TESTS_OPCHECK_TESTS_H
#define TALON_TESTS_OPCHECK_TESTS_H
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gpu.h"
#include "opcheck.h"
#include "talon.h"

#define NSTREAMS 4
#define MAX_PRINTED 12 /* failing cases printed per test */

static talon_ctx *g_ctx;
static const opcheck_op *g_ops; /* the program's ops */
static int g_nops;
static CUstream g_streams[NSTREAMS];
static int g_quick;
static int64_t g_cases, g_elements;

static const int64_t rows_full[] = {1, 7, 128, 4096};
static const int64_t cols_full[] = {1, 3, 111, 500, 4096, 8192, 16384};
static const int64_t rows_quick[] = {1, 7, 128};
static const int64_t cols_quick[] = {1, 3, 111, 500, 4096};
/* Extra widths at block and chunk boundaries: 8 (one vector), 257 (one past a 256-element
   chunk), 2056 (one vector past a 2048-element chunk), 3073 / 4097 / 8193 (one element past
   12, 16 or 32 cached elements per thread of a 256-thread norm block on the element-wise
   path), 8200 (one vector past 32 cached elements per thread on the 16-byte path), 65536
   (many passes over the uncached tail). */
static const int64_t cols_edge[] = {8, 257, 2056, 3073, 4097, 8193, 8200, 65536};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---------------------------------------------------------------- cases */
enum layout {
    L_CONTIG,   /* strides 0 (contiguous), aligned: the vector path when cols % 8 == 0 */
    L_PAD8,     /* row padding of 8/16/24 elements (in/out/residual): still the vector path */
    L_PAD3,     /* odd padding 3/5/7: the element-wise path */
    L_MISALIGN, /* every pointer one element off 16 bytes, strides given explicitly = row */
    L_NUM
};
static const char *const layout_name[L_NUM] = {"contiguous", "padded by 8", "padded odd",
                                               "misaligned"};

static uint64_t case_seed(int64_t rows, int64_t cols, int layout, int variant) {
    uint64_t h = 0x243F6A8885A308D3ull;
    h = (h ^ (uint64_t)rows) * 0x100000001B3ull;
    h = (h ^ (uint64_t)cols) * 0x100000001B3ull;
    h = (h ^ (uint64_t)layout) * 0x100000001B3ull;
    h = (h ^ (uint64_t)variant) * 0x100000001B3ull;
    return h;
}

static opcheck_case make_case(opcheck_op op, talon_dtype dtype, int64_t rows, int64_t cols,
                              int layout, int in_place) {
    opcheck_case c;
    const int64_t in_width = opcheck_op_is_norm(op) ? cols : 2 * cols;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.dtype = dtype;
    c.rows = rows;
    c.cols = cols;
    c.in_place = in_place;
    switch (layout) {
    case L_PAD8:
        c.in_stride = in_width + 8;
        c.out_stride = cols + 16;
        c.residual_stride = cols + 24;
        break;
    case L_PAD3:
        c.in_stride = in_width + 3;
        c.out_stride = cols + 5;
        c.residual_stride = cols + 7;
        break;
    case L_MISALIGN:
        c.in_stride = in_width;
        c.out_stride = cols;
        c.residual_stride = cols;
        c.offset = 1;
        break;
    default: break;
    }
    c.seed = case_seed(rows, cols, layout, in_place);
    return c;
}

/* Tensors an op has (for single-tensor misalignment). */
static unsigned op_tensors(opcheck_op op) {
    switch (op) {
    case OPCHECK_RMSNORM:
    case OPCHECK_LAYERNORM: return OPCHECK_T_IN | OPCHECK_T_OUT | OPCHECK_T_WEIGHT;
    case OPCHECK_LAYERNORM_BIAS:
        return OPCHECK_T_IN | OPCHECK_T_OUT | OPCHECK_T_WEIGHT | OPCHECK_T_BIAS;
    case OPCHECK_FUSED_ADD_RMSNORM: return OPCHECK_T_IN | OPCHECK_T_RESIDUAL | OPCHECK_T_WEIGHT;
    default: return OPCHECK_T_IN | OPCHECK_T_OUT;
    }
}

/* ---------------------------------------------------------------- bookkeeping */
typedef struct tally {
    const char *test;
    int64_t cases, failures, elements;
    double max_ulp, max_tol_ratio; /* over passing cases */
    struct timespec t0;
} tally;

static void tally_start(tally *t, const char *test) {
    memset(t, 0, sizeof *t);
    t->test = test;
    clock_gettime(CLOCK_MONOTONIC, &t->t0);
}

/* Records one checked case; prints it when it failed. */
static void tally_case(tally *t, const char *how, int rc, const opcheck_case *c,
                       const opcheck_result *r) {
    t->cases++;
    t->elements += r->elements;
    g_cases++;
    g_elements += r->elements;
    if (rc == 0 && r->pass) {
        if (r->max_ulp > t->max_ulp) t->max_ulp = r->max_ulp;
        if (r->max_tol_ratio > t->max_tol_ratio) t->max_tol_ratio = r->max_tol_ratio;
        return;
    }
    if (t->failures++ < MAX_PRINTED) {
        char desc[512], res[1400];
        opcheck_describe(c, desc, sizeof desc);
        opcheck_format(r, res, sizeof res);
        print_error("FAILED [%s] %s\n    %s\n", how, desc, res);
    }
}

/* Prints the test's totals and fails it if any case failed. */
static void tally_end(tally *t) {
    struct timespec t1;
    double s;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    s = (double)(t1.tv_sec - t->t0.tv_sec) + (double)(t1.tv_nsec - t->t0.tv_nsec) * 1e-9;
    print_message("%s: %lld cases, %lld elements checked, worst error %.2f ulp = %.2f of "
                  "the tolerance, %.1f s\n",
                  t->test, (long long)t->cases, (long long)t->elements, t->max_ulp,
                  t->max_tol_ratio, s);
    if (t->failures) {
        if (t->failures > MAX_PRINTED)
            print_error("... and %lld more failing cases\n",
                        (long long)(t->failures - MAX_PRINTED));
        print_error("%s: %lld of %lld cases failed\n", t->test, (long long)t->failures,
                    (long long)t->cases);
        fail();
    }
}

static int64_t pick_stream;
static CUstream next_stream(void) { return g_streams[pick_stream++ % NSTREAMS]; }

static void run_one(tally *t, const char *how, const opcheck_case *c) {
    opcheck_result r;
    int rc = opcheck_run(g_ctx, next_stream(), c, &r);
    tally_case(t, how, rc, c, &r);
}

/* ---------------------------------------------------------------- per op x dtype */
typedef struct op_param {
    const char *name;
    opcheck_op op;
    talon_dtype dtype;
} op_param;

static void test_op(void **state) {
    const op_param *p = (const op_param *)*state;
    const int64_t *rows = g_quick ? rows_quick : rows_full;
    const int64_t *cols = g_quick ? cols_quick : cols_full;
    const int nrows = g_quick ? COUNT(rows_quick) : COUNT(rows_full);
    const int ncols = g_quick ? COUNT(cols_quick) : COUNT(cols_full);
    const int norm = opcheck_op_is_norm(p->op);
    const int can_alias = p->op == OPCHECK_RMSNORM || p->op == OPCHECK_LAYERNORM ||
                          p->op == OPCHECK_LAYERNORM_BIAS;
    tally t;
    int i, k, l;
    tally_start(&t, p->name);

    /* the grid: every rows x cols x layout */
    for (i = 0; i < nrows; i++)
        for (k = 0; k < ncols; k++)
            for (l = 0; l < L_NUM; l++) {
                opcheck_case c = make_case(p->op, p->dtype, rows[i], cols[k], l, 0);
                run_one(&t, layout_name[l], &c);
            }

    /* in place (out == in, same stride): every layout for rmsnorm, two for layernorm */
    if (can_alias)
        for (i = 0; i < nrows; i++)
            for (k = 0; k < ncols; k++)
                for (l = 0; l < L_NUM; l++) {
                    opcheck_case c;
                    char how[64];
                    if (p->op != OPCHECK_RMSNORM && l != L_CONTIG && l != L_PAD3) continue;
                    c = make_case(p->op, p->dtype, rows[i], cols[k], l, 1);
                    snprintf(how, sizeof how, "in place, %s", layout_name[l]);
                    run_one(&t, how, &c);
                }

    /* widths at block/chunk boundaries, every layout */
    for (k = 0; k < COUNT(cols_edge); k++)
        for (l = 0; l < L_NUM; l++) {
            opcheck_case c = make_case(p->op, p->dtype, 3, cols_edge[k], l, 0);
            if (g_quick && cols_edge[k] > 8200) continue;
            run_one(&t, "boundary width", &c);
        }

    /* one tensor misaligned at a time: the dispatcher must check every pointer */
    for (i = 0; i < 5; i++) {
        unsigned bit = 1u << i;
        int64_t shape[2][2] = {{7, 4096}, {2, 8200}};
        if (!(op_tensors(p->op) & bit)) continue;
        for (k = 0; k < 2; k++) {
            opcheck_case c = make_case(p->op, p->dtype, shape[k][0], shape[k][1], L_CONTIG, 0);
            c.offset = 1;
            c.offset_mask = bit;
            c.seed ^= bit;
            run_one(&t, "one pointer misaligned", &c);
        }
    }
    /* a single stride off the vector grid while the others stay on it */
    {
        opcheck_case c = make_case(p->op, p->dtype, 5, 4096, L_PAD8, 0);
        c.in_stride += 1;
        run_one(&t, "in_stride odd, others padded by 8", &c);
        c = make_case(p->op, p->dtype, 5, 4096, L_PAD8, 0);
        if (p->op == OPCHECK_FUSED_ADD_RMSNORM) c.residual_stride += 1;
        else c.out_stride += 1;
        run_one(&t, "out/residual stride odd, others padded by 8", &c);
    }

    /* a large eps, so that ignoring or misplacing it shows */
    if (norm) {
        static const int64_t shape[][2] = {{7, 500}, {3, 4096}, {4, 1}, {2, 16384}};
        static const int layouts[] = {L_CONTIG, L_PAD3};
        for (k = 0; k < COUNT(shape); k++)
            for (l = 0; l < COUNT(layouts); l++) {
                opcheck_case c =
                    make_case(p->op, p->dtype, shape[k][0], shape[k][1], layouts[l], 0);
                c.eps = 0.25f;
                run_one(&t, "large eps", &c);
            }
    }
    tally_end(&t);
}

/* ---------------------------------------------------------------- streams */
/* Cases round-robin over the legacy stream and four created streams, then batches of cases
   in flight at once (two per stream) before one synchronisation. */
static void test_streams(void **state) {
    static const struct { int64_t rows, cols; int layout; } shapes[] = {
        {128, 4096, L_CONTIG}, {7, 111, L_PAD3}, {33, 8192, L_PAD8}, {5, 500, L_MISALIGN}};
    tally t;
    int o, dt, s, i, n = 0, batch;
    (void)state;
    tally_start(&t, "streams");

    for (o = 0; o < g_nops; o++)
        for (dt = 0; dt < 2; dt++)
            for (s = 0; s < COUNT(shapes); s++) {
                opcheck_case c = make_case(g_ops[o], (talon_dtype)dt, shapes[s].rows,
                                           shapes[s].cols, shapes[s].layout, 0);
                CUstream st = n % (NSTREAMS + 1) == NSTREAMS ? NULL : g_streams[n % (NSTREAMS + 1)];
                opcheck_result r;
                int rc = opcheck_run(g_ctx, st, &c, &r);
                tally_case(&t, st ? "round-robin stream" : "legacy default stream", rc, &c, &r);
                n++;
            }

    for (batch = 0; batch < 4; batch++) {
        enum { NJOBS = 2 * NSTREAMS };
        opcheck_case c[NJOBS];
        opcheck_result r[NJOBS];
        opcheck_job *j[NJOBS];
        int launched[NJOBS];
        CUresult e;
        for (i = 0; i < NJOBS; i++) {
            const int k = batch * NJOBS + i;
            const opcheck_op op = g_ops[k % g_nops];
            const int in_place = (op == OPCHECK_RMSNORM || op == OPCHECK_LAYERNORM) && i % 2;
            const int64_t rows = g_quick ? 128 : (i % 3 == 0 ? 2048 : 96);
            c[i] = make_case(op, (talon_dtype)(k / g_nops % 2), rows,
                             i % 2 ? 4096 : 1000 + i, i % L_NUM, in_place);
            j[i] = opcheck_prepare(&c[i], &r[i]);
            launched[i] = 0;
        }
        /* everything is uploaded; now launch all before synchronising anything */
        for (i = 0; i < NJOBS; i++)
            if (j[i]) launched[i] = opcheck_launch(j[i], g_ctx, g_streams[i % NSTREAMS]) == 0;
        for (s = 0; s < NSTREAMS; s++)
            if ((e = cu.cuStreamSynchronize(g_streams[s])) != CUDA_SUCCESS)
                print_error("cuStreamSynchronize: %s\n", gpu_error(e));
        for (i = 0; i < NJOBS; i++) {
            int rc = -1;
            if (j[i] && launched[i]) rc = opcheck_check(j[i]);
            opcheck_free(j[i]);
            tally_case(&t, "concurrent on 4 streams", rc, &c[i], &r[i]);
        }
    }
    tally_end(&t);
}

/* ---------------------------------------------------------------- graphs */
static void test_graph(void **state) {
    static const struct { int64_t rows, cols; int layout, in_place; } shapes[] = {
        {7, 4096, L_CONTIG, 0},  /* vector path */
        {128, 111, L_PAD3, 0},   /* element-wise path */
        {1, 500, L_MISALIGN, 0}, /* misaligned */
        {64, 8192, L_PAD8, 0},   /* vector path, padded */
        {16, 2056, L_CONTIG, 1}, /* in place (norms that allow it) */
    };
    tally t;
    int o, dt, s, n = 0;
    (void)state;
    tally_start(&t, "graph capture and replay");
    for (o = 0; o < g_nops; o++)
        for (dt = 0; dt < 2; dt++)
            for (s = 0; s < COUNT(shapes); s++) {
                const opcheck_op op = g_ops[o];
                opcheck_case c;
                opcheck_result r;
                int rc;
                if (shapes[s].in_place && op != OPCHECK_RMSNORM && op != OPCHECK_LAYERNORM &&
                    op != OPCHECK_LAYERNORM_BIAS)
                    continue;
                c = make_case(op, (talon_dtype)dt, shapes[s].rows, shapes[s].cols,
                              shapes[s].layout, shapes[s].in_place);
                rc = opcheck_run_graph(g_ctx, g_streams[n++ % NSTREAMS], &c, 2, &r);
                tally_case(&t, "graph, replayed twice", rc, &c, &r);
            }
    tally_end(&t);
}

/* The program's first op, 1 x 256 on buf (3 * 256 elements): talon_rmsnorm for the norms,
   talon_silu_and_mul for the activations. */
static talon_status capture_probe(talon_ctx *ctx, CUstream s, CUdeviceptr buf) {
    if (opcheck_op_is_norm(g_ops[0])) {
        talon_rmsnorm_args a;
        memset(&a, 0, sizeof a);
        a.in = buf;
        a.out = buf + 256 * 2;
        a.weight = buf + 512 * 2;
        a.rows = 1;
        a.cols = 256;
        a.eps = 1e-6f;
        return talon_rmsnorm(ctx, s, &a);
    } else {
        talon_silu_and_mul_args a;
        memset(&a, 0, sizeof a);
        a.in = buf;
        a.out = buf + 512 * 2;
        a.rows = 1;
        a.cols = 256;
        return talon_silu_and_mul(ctx, s, &a);
    }
}

/* A ctx created without TALON_CTX_PRELOAD refuses to load a module while its stream is
   capturing (TALON_ERROR_NOT_LOADED); after talon_ctx_preload the same capture works, and
   an uncaptured op on a fresh lazy ctx loads its module on first use. */
static void test_capture_needs_preload(void **state) {
    talon_ctx *lazy = NULL;
    CUdeviceptr buf = 0;
    CUgraph graph = NULL;
    CUstream s = g_streams[0];
    talon_status st;
    CUresult e;
    tally t;
    int o;
    (void)state;
    tally_start(&t, "capture without preload");

    assert_int_equal(talon_ctx_create(&lazy, NULL), TALON_SUCCESS);
    assert_int_equal(cu.cuMemAlloc(&buf, 3 * 256 * 2), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    st = capture_probe(lazy, s, buf);
    e = cu.cuStreamEndCapture(s, &graph);
    if (e == CUDA_SUCCESS && graph) cu.cuGraphDestroy(graph);
    cu.cuMemFree(buf);
    if (st != TALON_ERROR_NOT_LOADED || !strstr(talon_last_error(), "preload"))
        print_error("talon_%s during capture on a lazy ctx returned %s (%s), expected "
                    "TALON_ERROR_NOT_LOADED\n", opcheck_op_is_norm(g_ops[0]) ? "rmsnorm"
                    : "silu_and_mul", talon_status_string(st), talon_last_error());
    assert_int_equal(st, TALON_ERROR_NOT_LOADED);
    assert_int_equal(e, CUDA_SUCCESS);

    /* after an explicit preload, capture works */
    assert_int_equal(talon_ctx_preload(lazy), TALON_SUCCESS);
    for (o = 0; o < g_nops; o++) {
        opcheck_case c = make_case(g_ops[o], TALON_DTYPE_BF16, 5, 1024, L_CONTIG, 0);
        opcheck_result r;
        int rc = opcheck_run_graph(lazy, s, &c, 1, &r);
        tally_case(&t, "graph on a ctx preloaded after creation", rc, &c, &r);
    }
    talon_ctx_destroy(lazy);

    /* lazy loading outside capture */
    assert_int_equal(talon_ctx_create(&lazy, NULL), TALON_SUCCESS);
    for (o = 0; o < g_nops; o++) {
        opcheck_case c = make_case(g_ops[o], TALON_DTYPE_F16, 3, 777, L_PAD3, 0);
        opcheck_result r;
        int rc = opcheck_run(lazy, g_streams[o % NSTREAMS], &c, &r);
        tally_case(&t, "lazy load on first use", rc, &c, &r);
    }
    talon_ctx_destroy(lazy);
    tally_end(&t);
}

/* ---------------------------------------------------------------- threads */
/* Several threads race to the first use of each module of one lazy ctx. */
#define NTHREADS 8
typedef struct thread_job {
    talon_ctx *ctx;
    CUcontext cuctx;
    CUstream stream;
    pthread_barrier_t *barrier;
    opcheck_case c;
    opcheck_result r;
    int rc;
} thread_job;

static void *thread_main(void *p) {
    thread_job *tj = (thread_job *)p;
    opcheck_job *j;
    tj->rc = -1;
    memset(&tj->r, 0, sizeof tj->r);
    if (cu.cuCtxSetCurrent(tj->cuctx) != CUDA_SUCCESS) {
        pthread_barrier_wait(tj->barrier);
        snprintf(tj->r.error, sizeof tj->r.error, "cuCtxSetCurrent failed in a thread");
        return NULL;
    }
    j = opcheck_prepare(&tj->c, &tj->r);
    pthread_barrier_wait(tj->barrier); /* every thread launches at the same moment */
    if (!j) return NULL;
    if (opcheck_launch(j, tj->ctx, tj->stream) == 0 &&
        cu.cuStreamSynchronize(tj->stream) == CUDA_SUCCESS)
        tj->rc = opcheck_check(j);
    opcheck_free(j);
    return NULL;
}

static void test_threads(void **state) {
    gpu *g = (gpu *)*state;
    talon_ctx *lazy = NULL;
    pthread_barrier_t barrier;
    pthread_t th[NTHREADS];
    thread_job tj[NTHREADS];
    tally t;
    int i, round;
    tally_start(&t, "threads");
    for (round = 0; round < 3; round++) {
        assert_int_equal(talon_ctx_create(&lazy, NULL), TALON_SUCCESS);
        assert_int_equal(pthread_barrier_init(&barrier, NULL, NTHREADS), 0);
        for (i = 0; i < NTHREADS; i++) {
            tj[i].ctx = lazy;
            tj[i].cuctx = g->ctx;
            tj[i].stream = g_streams[i % NSTREAMS];
            tj[i].barrier = &barrier;
            tj[i].c = make_case(g_ops[(i + round) % g_nops],
                                (talon_dtype)((i / 2 + round) % 2), 16, i % 2 ? 1024 : 333,
                                i % L_NUM, 0);
            assert_int_equal(pthread_create(&th[i], NULL, thread_main, &tj[i]), 0);
        }
        for (i = 0; i < NTHREADS; i++) {
            pthread_join(th[i], NULL);
            tally_case(&t, "lazy ctx shared by 8 threads", tj[i].rc, &tj[i].c, &tj[i].r);
        }
        pthread_barrier_destroy(&barrier);
        talon_ctx_destroy(lazy);
    }
    tally_end(&t);
}

/* ---------------------------------------------------------------- main */
/* The program: prog names it in its output, group is the cmocka group, ops[nops] its ops. */
static int opcheck_tests_main(const char *prog, const char *group, const opcheck_op *ops,
                              int nops) {
    static op_param params[OPCHECK_NUM_OPS * 2];
    static char names[OPCHECK_NUM_OPS * 2][48];
    static struct CMUnitTest tests[OPCHECK_NUM_OPS * 2 + 4];
    const char *quick = getenv("TALON_TEST_QUICK");
    talon_ctx_options options = {NULL, TALON_CTX_PRELOAD};
    struct timespec t0, t1;
    gpu g;
    char err[512];
    int i, failed, n = 0;

    if (nops < 1 || nops > OPCHECK_NUM_OPS) {
        fprintf(stderr, "%s: %d ops (a test program bug)\n", prog, nops);
        return 1;
    }
    g_ops = ops;
    g_nops = nops;
    if (gpu_open(&g, err, sizeof err)) {
        fprintf(stderr, "%s: no GPU: %s (this test needs an H100/H200)\n", prog, err);
        return 1;
    }
    if (talon_ctx_create(&g_ctx, &options) != TALON_SUCCESS) {
        fprintf(stderr, "%s: talon_ctx_create on \"%s\" failed: %s\n", prog, g.name,
                talon_last_error());
        return 1;
    }
    for (i = 0; i < NSTREAMS; i++) {
        CUresult e = cu.cuStreamCreate(&g_streams[i], CU_STREAM_DEFAULT);
        if (e != CUDA_SUCCESS) {
            fprintf(stderr, "%s: cuStreamCreate failed: %s\n", prog, gpu_error(e));
            return 1;
        }
    }
    g_quick = quick && strcmp(quick, "0") != 0;
    printf("%s: %s, talon %s (%s, nvcc %s), %s shape grid\n", prog, g.name,
           talon_bundle_info_get()->version, talon_bundle_info_get()->git_commit,
           talon_bundle_info_get()->nvcc_version,
           g_quick ? "quick (TALON_TEST_QUICK)" : "full");
    fflush(stdout);

    for (i = 0; i < nops * 2; i++) {
        params[i].op = ops[i / 2];
        params[i].dtype = i % 2 ? TALON_DTYPE_F16 : TALON_DTYPE_BF16;
        snprintf(names[i], sizeof names[i], "%s_%s", opcheck_op_name(params[i].op),
                 opcheck_dtype_name(params[i].dtype));
        params[i].name = names[i];
        tests[n].name = names[i];
        tests[n].test_func = test_op;
        tests[n].initial_state = &params[i];
        n++;
    }
    tests[n].name = "streams";
    tests[n++].test_func = test_streams;
    tests[n].name = "graph_capture_replay";
    tests[n++].test_func = test_graph;
    tests[n].name = "capture_needs_preload";
    tests[n++].test_func = test_capture_needs_preload;
    tests[n].name = "threads_lazy_load";
    tests[n].test_func = test_threads;
    tests[n++].initial_state = &g;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    failed = _cmocka_run_group_tests(group, tests, (size_t)n, NULL, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%s: %lld cases, %lld elements checked against the fp64 reference, "
           "%d failed tests, %.1f s\n", prog,
           (long long)g_cases, (long long)g_elements, failed,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);

    for (i = 0; i < NSTREAMS; i++) cu.cuStreamDestroy(g_streams[i]);
    talon_ctx_destroy(g_ctx);
    opcheck_cleanup();
    return failed ? 1 : 0;
}
#endif
