/* GPU test (H100/H200) of checked mode (TALON_CTX_CHECKED, talon_ctx_check), and its cost.
   For every check talon.h's CHECKED MODE lists, one bad index is planted in otherwise valid
   inputs and the op runs on a checked ctx; talon_ctx_check must report the op, the kernel's
   family, the index tensor, the entry's position, its value and the bound, and clear the
   record (a second check reports nothing). The outputs are compared byte for byte with an
   unchecked ctx's run, which gets the same inputs where the op is safe without checking (every
   check but decode's page ids) and the valid inputs for decode: they must agree everywhere but
   where talon.h says the checked op differs (decode: the request's o and lse rows NaN). Every
   output carries poisoned guard bytes before and after it, which must stay poisoned; bad page
   ids point past the caches (exact allocations, so compute-sanitizer's memcheck flags a read)
   or far away (a fault without it). Valid inputs (negative padding slots, -1 expert ids,
   unread page-table entries among them) must give equal outputs on both ctxs and no report.
   Also: the first of two violations only, a captured graph replayed, and a record written
   by a kernel on another stream read with stream 0.
   Each checked op's cases (and --bench cases) are its family's: CHECKED_OPS (op_calls.h) names
   test_<...> and <name>_bench in tests/<family>/cases_<family>.h; this file holds what they
   share (regions, run_pair, expect_report, the timing) and the record's own tests.

   test_gpu_checked --bench [reps]: the cost instead of the tests: each family's op on an
   unchecked and a checked ctx, interleaved rounds of CUDA-event timings, the median per call.
   Built with -DCHECKED_BASELINE against an older talon (before checked mode), it times the
   unchecked ctx only, for the comparison of the default path across builds (docs/notes/
   checked.md has the commands). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpu.h"
#include "ref.h"
#include "talon.h"
#include "op_calls.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define GUARD 256
#define POISON 0xA5

static gpu_test g;
static talon_ctx *g_chk; /* TALON_CTX_CHECKED | TALON_CTX_PRELOAD */
static long long g_cases, g_elements;

/* ================================================================ buffers */
#ifndef CHECKED_BASELINE /* the regions serve the tests; a baseline build only times */
/* A device tensor with `guard` poisoned bytes on each side (0: an exact allocation), reset
   before every run to its initial contents (init) or to poison (init NULL). */
typedef struct region {
    CUdeviceptr base, p;
    size_t bytes, guard;
    void *init;
} region;

static region region_new(size_t bytes, size_t guard, const void *init) {
    region r;
    memset(&r, 0, sizeof r);
    r.bytes = bytes;
    r.guard = guard;
    r.base = gpu_alloc(bytes + 2 * guard);
    r.p = r.base + guard;
    if (init) {
        r.init = malloc(bytes);
        memcpy(r.init, init, bytes);
    }
    return r;
}

static void region_free(region *r) {
    if (r->base) cu.cuMemFree(r->base);
    free(r->init);
    memset(r, 0, sizeof *r);
}

static void region_reset(const region *r) {
    GPU_CK(cu.cuMemsetD8(r->base, POISON, r->bytes + 2 * r->guard));
    if (r->init) GPU_CK(cu.cuMemcpyHtoD(r->p, r->init, r->bytes));
}

/* The whole allocation, guards included (caller frees). */
static unsigned char *region_read(const region *r) {
    unsigned char *h = (unsigned char *)malloc(r->bytes + 2 * r->guard);
    GPU_CK(cu.cuMemcpyDtoH(h, r->base, r->bytes + 2 * r->guard));
    return h;
}

static int guards_ok(const region *r, const unsigned char *h) {
    size_t i;
    for (i = 0; i < r->guard; i++)
        if (h[i] != POISON || h[r->guard + r->bytes + i] != POISON) return 0;
    return 1;
}

#endif

static void upload(CUdeviceptr p, const void *h, size_t n) { GPU_CK(cu.cuMemcpyHtoD(p, h, n)); }

static uint16_t *random_16(talon_dtype t, size_t n, uint64_t seed, float scale) {
    uint16_t *h = (uint16_t *)malloc(n * 2);
    uint64_t s = ref_mix64(seed);
    size_t i;
    for (i = 0; i < n; i++) h[i] = ref_from_f32(t, scale * (2.0f * ref_unit01(&s) - 1.0f));
    return h;
}

/* The ops through op_calls.h's op_call: each case passes its op's args struct, which a pointer
   to the union may point to (C11 6.7.2.1: a union's pointer, converted, points to its members
   and back). */
static talon_status run_op(talon_ctx *ctx, int op, const void *args) {
    return op_call(ctx, g.stream, op, (const op_args *)args);
}

#ifndef CHECKED_BASELINE /* the tests need checked mode; a baseline build only times */
/* ================================================================ checks */
typedef struct want_report {
    const char *op, *what; /* NULL op: no violation expected */
    int64_t index, value, bound;
    const char *kernel; /* how the kernel's symbol starts; NULL: as the op's name */
} want_report;

/* Reads the checked ctx's record after g.stream's work; returns the failures. */
static int expect_report(const char *name, const want_report *w) {
    talon_check_report r;
    int bad = 0;
    if (talon_ctx_check(g_chk, g.stream, &r) != TALON_SUCCESS) {
        print_error("%s: talon_ctx_check: %s\n", name, talon_last_error());
        return 1;
    }
    if (!w->op) {
        if (r.violated) {
            print_error("%s: unexpected violation: %s %s %s[%lld] = %lld (bound %lld)\n", name,
                        r.op, r.kernel, r.what, (long long)r.index, (long long)r.value,
                        (long long)r.bound);
            return 1;
        }
        return 0;
    }
    if (!r.violated) {
        print_error("%s: no violation recorded (want %s[%lld] = %lld)\n", name, w->what,
                    (long long)w->index, (long long)w->value);
        return 1;
    }
    {
        const char *prefix = w->kernel ? w->kernel : w->op;
        bad |= strcmp(r.op, w->op) != 0 || strcmp(r.what, w->what) != 0 ||
               r.index != w->index || r.value != w->value || r.bound != w->bound || !r.kernel ||
               !r.rule || strncmp(r.kernel, prefix, strlen(prefix)) != 0;
    }
    if (bad)
        print_error("%s: report %s (%s) %s[%lld] = %lld, bound %lld; want %s %s[%lld] = %lld, "
                    "bound %lld\n", name, r.op, r.kernel, r.what, (long long)r.index,
                    (long long)r.value, (long long)r.bound, w->op, w->what, (long long)w->index,
                    (long long)w->value, (long long)w->bound);
    if (talon_ctx_check(g_chk, g.stream, &r) != TALON_SUCCESS || r.violated) {
        print_error("%s: the record was not cleared\n", name);
        bad = 1;
    }
    return bad;
}

/* A difference the checked run may show in region i at byte offset off (of the tensor). */
typedef int (*allowed_fn)(const void *ctx, int i, size_t off, const unsigned char *checked);

/* Runs ref(g.ctx) and chk(g_chk) from the same initial regions, checks the report and compares
   the regions byte for byte (guards poisoned in both). */

static int run_pair(const char *name, region *regions, int n, int op, const void *ref_args,
                    const void *chk_args, const want_report *w, allowed_fn allowed,
                    const void *actx) {
    unsigned char *ref[8], *got[8];
    int i, fails = 0;
    size_t b;
    for (i = 0; i < n; i++) region_reset(&regions[i]);
    if (run_op(g.ctx, op, ref_args) != TALON_SUCCESS) {
        print_error("%s: unchecked run: %s\n", name, talon_last_error());
        return 1;
    }
    GPU_CK(cu.cuStreamSynchronize(g.stream));
    for (i = 0; i < n; i++) ref[i] = region_read(&regions[i]);
    for (i = 0; i < n; i++) region_reset(&regions[i]);
    if (run_op(g_chk, op, chk_args) != TALON_SUCCESS) {
        print_error("%s: checked run: %s\n", name, talon_last_error());
        fails = 1;
    }
    fails += expect_report(name, w);
    for (i = 0; i < n; i++) got[i] = region_read(&regions[i]);
    if (gpu_call_failed) {
        print_error("%s: a driver call failed (see above)\n", name);
        gpu_call_failed = 0;
        fails++;
    }
    for (i = 0; i < n; i++) {
        const region *r = &regions[i];
        int shown = 0;
        if (!guards_ok(r, ref[i]) || !guards_ok(r, got[i])) {
            print_error("%s: region %d: a guard byte was written\n", name, i);
            fails++;
        }
        for (b = 0; b < r->bytes; b++) {
            const size_t at = r->guard + b;
            if (allowed && allowed(actx, i, b, got[i] + r->guard)) continue;
            if (ref[i][at] != got[i][at]) {
                if (shown++ < 3)
                    print_error("%s: region %d byte %zu: checked 0x%02x, unchecked 0x%02x\n",
                                name, i, b, got[i][at], ref[i][at]);
            }
        }
        if (shown) fails++;
        g_elements += (long long)r->bytes;
        free(ref[i]);
        free(got[i]);
    }
    g_cases++;
    return fails;
}

#endif /* CHECKED_BASELINE */

/* ================================================================ the ops' cases */
/* --bench: one case (an op on valid inputs) */
typedef struct bench_case {
    const char *name;
    int op;     /* OP_* of op_calls.h */
    void *args; /* the op's args (valid inputs) */
} bench_case;

static CUdeviceptr bench_fill(size_t bytes, uint64_t seed) {
    CUdeviceptr p = gpu_alloc(bytes);
    uint16_t *h = random_16(TALON_DTYPE_BF16, bytes / 2, seed, 1.0f);
    upload(p, h, bytes / 2 * 2);
    free(h);
    return p;
}

/* each checked op's tests and --bench cases (CHECKED_OPS: test_<...> and <name>_bench in
   tests/<family>/cases_<family>.h) */
#define CHECKED_FAMILY_CASES
#include "family_cases.h"
#undef CHECKED_FAMILY_CASES

#ifndef CHECKED_BASELINE
/* ================================================================ record semantics */
/* Two bad indices in one launch: one of them is reported, once. A graph captured on the
   checked ctx checks at every replay. A record written on another stream is read with 0. */
static void test_record(void **state) {
    enum { ROWS = 8, IN_ROWS = 4, COLS = 64 };
    int32_t idx[ROWS] = {0, 1, 9, 3, 2, -2, 1, 0};
    CUdeviceptr din = gpu_alloc(IN_ROWS * COLS * 2), dout = gpu_alloc(ROWS * COLS * 2);
    CUdeviceptr didx = gpu_alloc(sizeof idx);
    talon_gather_rows_args a;
    talon_check_report r;
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    CUstream other = NULL;
    int rep;
    (void)state;
    GPU_CK(cu.cuMemsetD8(din, 0, IN_ROWS * COLS * 2));
    upload(didx, idx, sizeof idx);
    memset(&a, 0, sizeof a);
    a.out = dout; a.in = din; a.indices = didx; a.rows = ROWS; a.cols = COLS; a.in_rows = IN_ROWS;
    assert_int_equal(talon_gather_rows(g_chk, g.stream, &a), TALON_SUCCESS);
    assert_int_equal(talon_ctx_check(g_chk, g.stream, &r), TALON_SUCCESS);
    assert_int_equal(r.violated, 1);
    assert_true((r.index == 2 && r.value == 9) || (r.index == 5 && r.value == -2));
    assert_int_equal(talon_ctx_check(g_chk, g.stream, &r), TALON_SUCCESS);
    assert_int_equal(r.violated, 0);

    assert_int_equal(cu.cuStreamBeginCapture(g.stream, CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
    assert_int_equal(talon_gather_rows(g_chk, g.stream, &a), TALON_SUCCESS);
    assert_int_equal(talon_ctx_check(g_chk, g.stream, &r), TALON_ERROR_INVALID_ARGUMENT);
    assert_int_equal(cu.cuStreamEndCapture(g.stream, &graph), 0); /* the capture survived */
    assert_int_equal(cu.cuGraphInstantiateWithFlags(&exec, graph, 0), 0);
    idx[5] = 0;
    for (rep = 0; rep < 3; rep++) {
        idx[2] = rep + 4; /* the replay follows the buffer's ids */
        upload(didx, idx, sizeof idx);
        assert_int_equal(cu.cuGraphLaunch(exec, g.stream), 0);
        assert_int_equal(talon_ctx_check(g_chk, g.stream, &r), TALON_SUCCESS);
        assert_int_equal(r.violated, 1);
        assert_int_equal(r.index, 2);
        assert_int_equal(r.value, rep + 4);
        assert_string_equal(r.kernel, "talon_gather_rows_u16");
    }

    assert_int_equal(cu.cuStreamCreate(&other, CU_STREAM_NON_BLOCKING), 0);
    GPU_CK(cu.cuCtxSynchronize()); /* the ids are in (a non-blocking stream skips the legacy one) */
    assert_int_equal(talon_gather_rows(g_chk, other, &a), TALON_SUCCESS);
    assert_int_equal(talon_ctx_check(g_chk, NULL, &r), TALON_SUCCESS); /* every stream */
    assert_int_equal(r.violated, 1);
    assert_int_equal(r.index, 2);
    assert_int_equal(gpu_call_failed, 0);
    cu.cuStreamDestroy(other);
    cu.cuGraphExecDestroy(exec);
    cu.cuGraphDestroy(graph);
    cu.cuMemFree(din); cu.cuMemFree(dout); cu.cuMemFree(didx);
    g_cases += 6;
}

#endif

/* ================================================================ --bench */
static int cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* Median microseconds per call over `reps` rounds of n calls (n sized to ~20 ms a round). */
static double bench_time(talon_ctx *ctx, const bench_case *c, int n, CUevent e0, CUevent e1) {
    float ms = 0.f;
    int i;
    GPU_CK(cu.cuEventRecord(e0, g.stream));
    for (i = 0; i < n; i++)
        if (run_op(ctx, c->op, c->args) != TALON_SUCCESS) {
            fprintf(stderr, "%s: %s\n", c->name, talon_last_error());
            exit(1);
        }
    GPU_CK(cu.cuEventRecord(e1, g.stream));
    GPU_CK(cu.cuEventSynchronize(e1));
    GPU_CK(cu.cuEventElapsedTime(&ms, e0, e1));
    return 1000.0 * ms / n;
}

static void bench_run(const bench_case *c, int reps) {
    double un[64], ch[64], one;
    int n, r;
    CUevent e0, e1;
    GPU_CK(cu.cuEventCreate(&e0, 0));
    GPU_CK(cu.cuEventCreate(&e1, 0));
    bench_time(g.ctx, c, 3, e0, e1); /* warm up */
    one = bench_time(g.ctx, c, 3, e0, e1);
    n = (int)(20000.0 / (one > 1.0 ? one : 1.0));
    n = n < 5 ? 5 : n > 2000 ? 2000 : n;
    if (reps > 64) reps = 64;
    for (r = 0; r < reps; r++) { /* interleaved, so drift (clocks, heat) hits both alike */
        un[r] = bench_time(g.ctx, c, n, e0, e1);
#ifndef CHECKED_BASELINE
        ch[r] = bench_time(g_chk, c, n, e0, e1);
#else
        ch[r] = 0.0;
#endif
    }
    qsort(un, (size_t)reps, sizeof un[0], cmp_double);
    qsort(ch, (size_t)reps, sizeof ch[0], cmp_double);
#ifndef CHECKED_BASELINE
    {
        talon_check_report rep;
        if (talon_ctx_check(g_chk, g.stream, &rep) != TALON_SUCCESS || rep.violated) {
            fprintf(stderr, "%s: the valid inputs recorded a violation\n", c->name);
            exit(1);
        }
    }
    printf("bench %-44s unchecked %9.2f us  checked %9.2f us  %+6.2f%%  (%d x %d calls)\n",
           c->name, un[reps / 2], ch[reps / 2], 100.0 * (ch[reps / 2] / un[reps / 2] - 1.0),
           reps, n);
#else
    printf("bench %-44s unchecked %9.2f us  (baseline build; %d x %d calls)\n", c->name,
           un[reps / 2], reps, n);
#endif
    fflush(stdout);
    cu.cuEventDestroy(e0);
    cu.cuEventDestroy(e1);
}

/* Each checked op's --bench cases (<name>_bench, its family's cases_<family>.h) at a size of a
   serving step (Llama-3-8B-like heads: 32 q, 8 kv, d 128). */
static int bench_main(int reps) {
    bench_case cases[16];
    int nc = 0, i, n;
#define BENCH_CASES(name, params, gpu_test)                                                    \
    if ((n = name##_bench(cases + nc)) < 0) return 1;                                          \
    nc += n;
    CHECKED_OPS(BENCH_CASES)
#undef BENCH_CASES
    if (gpu_call_failed) return 1;
    printf("bench: %s, %d rounds each, median per call%s\n", g.g.name, reps,
#ifndef CHECKED_BASELINE
           "; unchecked = the default ctx, checked = TALON_CTX_CHECKED"
#else
           "; baseline build (talon before checked mode)"
#endif
    );
    for (i = 0; i < nc; i++) bench_run(&cases[i], reps);
    return gpu_call_failed ? 1 : 0; /* the buffers go with the process */
}

int main(int argc, char **argv) {
    const int bench = argc > 1 && !strcmp(argv[1], "--bench");
    int failed = 0;
    /* a blocking stream: the legacy stream's memsets and copies that reset the buffers are
       ordered before the ops */
    if (gpu_test_begin(&g, "test_gpu_checked", 0)) return 1;
#ifndef CHECKED_BASELINE
    {
        talon_ctx_options o = {NULL, TALON_CTX_CHECKED | TALON_CTX_PRELOAD};
        if (talon_ctx_create(&g_chk, &o) != TALON_SUCCESS) {
            fprintf(stderr, "test_gpu_checked: checked ctx: %s\n", talon_last_error());
            return 1;
        }
    }
#else
    if (!bench) {
        fprintf(stderr, "test_gpu_checked: a CHECKED_BASELINE build only times (--bench)\n");
        return 1;
    }
#endif
    if (bench) {
        const int reps = argc > 2 ? atoi(argv[2]) : 15;
        failed = bench_main(reps > 0 ? reps : 15);
    } else {
#ifndef CHECKED_BASELINE
        const struct CMUnitTest tests[] = {
#define CHECKED_TEST(name, params, gpu_test) cmocka_unit_test(gpu_test),
            CHECKED_OPS(CHECKED_TEST)
#undef CHECKED_TEST
            cmocka_unit_test(test_record),
        };
        failed = cmocka_run_group_tests_name("talon checked mode", tests, NULL, NULL);
#endif
    }
    talon_ctx_destroy(g_chk);
    return gpu_test_end(&g, "", g_cases, g_elements, failed);
}
