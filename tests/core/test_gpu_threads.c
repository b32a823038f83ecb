/* GPU test (H100/H200) of talon under concurrency (issue 24, item 3): every op of talon.h run
   from 8 host threads at once on ONE talon_ctx, created without TALON_CTX_PRELOAD so that the
   threads' first calls race on the lazy module loads. Each thread has its own non-blocking
   stream and its own device buffers for every op, and mixes eager calls with CUDA graphs: from
   its second round on it captures a random subset of the ops (modes thread-local and relaxed,
   alternately, so other threads keep calling, loading and capturing meanwhile) and replays the
   graph twice a round, recapturing a new subset every few rounds.

   What is checked:
   - Golden run, single-threaded, on a separate preloaded ctx: every op on two shapes drawn at
     random from the seed (odd sizes, strides, offsets, every dtype the op takes; see
     op_cases.h), every output element against the fp64 references of tests/<family>/ref_*.c
     with the family tests' tolerances (exact where the op is exact), padding, guards and
     inputs unchanged.
   - On the fresh shared ctx, before the threads start, each op called inside a capture must
     fail with TALON_ERROR_NOT_LOADED (nothing is loaded yet: the threads' loads are real).
   - Every threaded run (eager or graph replay): outputs poisoned with 0xFF bytes and in-place
     buffers restored before it; afterwards every byte of every output and in-place buffer
     (padding and guards included) must equal the golden run's. The ops are deterministic (the
     same inputs give the same bits on one device: no atomics, fixed summation orders), so any
     difference is a failure. The one output whose order the contract leaves open, talon_topk
     with sorted = 0, is compared after oc_canon sorts each row's (index, value) pairs by index.
   Ops run in a per-thread random order from the printed seed; ops between two
   synchronisations are launched back to back (1 to 4 at a time) so that several kernels of a
   thread are in flight with those of the others.

   Usage: test_gpu_threads [seed] (or TALON_THREADS_SEED=seed; default: from the clock, printed).
   TALON_TEST_QUICK=1 (compute-sanitizer) runs 6 rounds instead of 60. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "op_cases.h"

#define THREADS 8
#define VARIANTS 2       /* shapes per op; thread t runs variant (t + op) % VARIANTS */
#define REGRAPH 4        /* rounds between two captures of a thread */
#define REPLAYS 2        /* graph launches per round */
#define MAX_BATCH 4      /* eager ops launched before one synchronisation */
#define POISON_BYTES ((size_t)1 << 20)
#define MAX_PRINTED 20

typedef struct golden {
    oc_job job;
    uint8_t *img[OC_MAXBUF]; /* canonical images of the OUT and INOUT buffers */
    int64_t elements;        /* elements of those buffers: compared per run */
    int64_t checked;         /* elements the golden run compared with the references */
} golden;

static golden g_gold[NUM_OPS][VARIANTS];
static talon_ctx *g_shared;
static CUcontext g_cu;
static CUdeviceptr g_poison;
static int g_rounds;
static pthread_mutex_t g_print = PTHREAD_MUTEX_INITIALIZER;
static int g_printed;

typedef struct worker {
    int id;
    CUstream stream;
    oc_dev dev[NUM_OPS];
    op_args args[NUM_OPS];
    uint8_t *img[NUM_OPS][OC_MAXBUF];
    uint64_t rng;
    int captures;
    long long eager, graph_runs, graphs, relaxed, replays, elements, failures;
} worker;

static int variant_of(const worker *w, int op) { return (w->id + op) % VARIANTS; }

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void report(worker *w, const char *fmt, ...) {
    va_list ap;
    if (w) w->failures++;
    pthread_mutex_lock(&g_print);
    if (g_printed++ < MAX_PRINTED) {
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
    } else if (g_printed == MAX_PRINTED + 1) {
        fprintf(stderr, "(further failures not printed)\n");
    }
    pthread_mutex_unlock(&g_print);
}

static void shuffle(int *v, int n, uint64_t *s) {
    int i;
    for (i = n - 1; i > 0; i--) {
        const int k = (int)(ref_next64(s) % (uint64_t)(i + 1)), x = v[i];
        v[i] = v[k];
        v[k] = x;
    }
}

/* ---------------------------------------------------------------- golden run */
/* One case on the golden ctx, checked against the references; its images kept. */
static int golden_run(talon_ctx *ctx, CUstream stream, golden *g, const oc_case *c) {
    char desc[700];
    oc_dev d;
    op_args a;
    uint8_t *img[OC_MAXBUF];
    oc_stats st;
    talon_status s;
    CUresult r;
    int i, rc = -1;
    memset(&st, 0, sizeof st);
    oc_describe(c, desc, sizeof desc);
    if (oc_build(&g->job, c, ctx)) {
        fprintf(stderr, "golden %s: building the case failed\n", desc);
        return -1;
    }
    if ((r = oc_dev_alloc(&g->job, &d))) {
        fprintf(stderr, "golden %s: device buffers: %s\n", desc, gpu_error(r));
        return -1;
    }
    if (oc_img_alloc(&g->job, img, 1)) {
        fprintf(stderr, "golden %s: out of host memory\n", desc);
        oc_dev_free(&g->job, &d);
        return -1;
    }
    oc_args(&g->job, &d, &a);
    if ((r = oc_dev_reset(&g->job, &d, stream, g_poison, POISON_BYTES))) {
        fprintf(stderr, "golden %s: reset: %s\n", desc, gpu_error(r));
    } else if ((s = op_call(ctx, stream, c->op, &a)) != TALON_SUCCESS) {
        fprintf(stderr, "golden %s: %s\n", desc, talon_last_error());
    } else if ((r = cu.cuStreamSynchronize(stream)) || (r = oc_dev_download(&g->job, &d, img))) {
        fprintf(stderr, "golden %s: %s\n", desc, gpu_error(r));
    } else {
        oc_check(&g->job, img, &st, 0);
        printf("  golden %-36s %9lld elements, worst %.3f of the tolerance%s: %s\n",
               oc_op_name(c->op), (long long)st.elements, st.worst, st.bad ? ", FAILED" : "", desc);
        if (st.bad) fprintf(stderr, "golden %s: %lld mismatches; first: %s\n", desc, (long long)st.bad, st.first);
        else rc = 0;
        g->checked = st.elements;
    }
    oc_canon(&g->job, img);
    for (i = 0; i < OC_MAXBUF; i++) { /* keep the outputs and in-place buffers */
        if (img[i] && g->job.b[i].role == OC_IN) {
            free(img[i]);
            img[i] = NULL;
        }
        g->img[i] = img[i];
    }
    g->elements = oc_out_elements(&g->job);
    oc_dev_free(&g->job, &d);
    return rc;
}

/* ---------------------------------------------------------------- threads */
/* Downloads op's buffers after a run and compares them with the golden images. */
static void verify(worker *w, int op, int round, const char *how) {
    const golden *g = &g_gold[op][variant_of(w, op)];
    CUresult r;
    int i;
    if ((r = oc_dev_download(&g->job, &w->dev[op], w->img[op]))) {
        report(w, "thread %d round %d %s %s: download: %s", w->id, round, how, oc_op_name(op), gpu_error(r));
        return;
    }
    oc_canon(&g->job, w->img[op]);
    for (i = 0; i < g->job.nbuf; i++) {
        size_t k;
        if (!g->img[i] || !memcmp(w->img[op][i], g->img[i], g->job.b[i].bytes)) continue;
        for (k = 0; w->img[op][i][k] == g->img[i][k]; k++) {}
        {
            char desc[700];
            oc_describe(&g->job.c, desc, sizeof desc);
            report(w, "thread %d round %d %s %s: %s byte %zu = 0x%02x, the golden run's 0x%02x "
                   "(case: %s)", w->id, round, how, oc_op_name(op), g->job.b[i].name, k,
                   w->img[op][i][k], g->img[i][k], desc);
        }
        return;
    }
    w->elements += g->elements;
}

/* Poisons op's outputs and restores its in-place buffers, on the thread's stream. */
static int reset(worker *w, int op, int round) {
    const CUresult r = oc_dev_reset(&g_gold[op][variant_of(w, op)].job, &w->dev[op], w->stream,
                                    g_poison, POISON_BYTES);
    if (r) report(w, "thread %d round %d: resetting %s's buffers: %s", w->id, round, oc_op_name(op), gpu_error(r));
    return r ? -1 : 0;
}

/* Captures ops[0..n) into a graph on the thread's stream. */
static int capture(worker *w, const int *ops, int n, int round, CUgraphExec *exec) {
    const CUstreamCaptureMode mode = (w->id + w->captures++) % 2 ? CU_STREAM_CAPTURE_MODE_RELAXED
                                                                 : CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    CUgraph graph = NULL;
    CUresult r;
    int i, ok = 1;
    *exec = NULL;
    if ((r = cu.cuStreamBeginCapture(w->stream, mode))) {
        report(w, "thread %d round %d: cuStreamBeginCapture: %s", w->id, round, gpu_error(r));
        return -1;
    }
    for (i = 0; i < n && ok; i++) {
        const talon_status s = op_call(g_shared, w->stream, ops[i], &w->args[ops[i]]);
        if (s != TALON_SUCCESS) {
            report(w, "thread %d round %d: %s inside a capture: %s", w->id, round,
                   oc_op_name(ops[i]), talon_last_error());
            ok = 0;
        }
    }
    if ((r = cu.cuStreamEndCapture(w->stream, &graph))) {
        report(w, "thread %d round %d: cuStreamEndCapture: %s", w->id, round, gpu_error(r));
        ok = 0;
    }
    if (ok && (r = cu.cuGraphInstantiateWithFlags(exec, graph, 0))) {
        report(w, "thread %d round %d: cuGraphInstantiate: %s", w->id, round, gpu_error(r));
        ok = 0;
    }
    if (graph) cu.cuGraphDestroy(graph);
    if (!ok) return -1;
    w->graphs++;
    w->relaxed += mode == CU_STREAM_CAPTURE_MODE_RELAXED;
    return 0;
}

static void *worker_main(void *arg) {
    worker *w = (worker *)arg;
    CUgraphExec exec = NULL;
    int graph_ops[NUM_OPS], n_graph = 0, in_graph[NUM_OPS], round, i, stop = 0;
    CUresult r;
    if ((r = cu.cuCtxSetCurrent(g_cu))) {
        report(w, "thread %d: cuCtxSetCurrent: %s", w->id, gpu_error(r));
        return NULL;
    }
    memset(in_graph, 0, sizeof in_graph);
    for (round = 0; round < g_rounds && !stop; round++) {
        int order[NUM_OPS], n = 0, graph_at, pos = 0;
        /* round 0 runs every op eagerly (the lazy loads race there); a thread captures only
           ops it has run itself, whose modules are then loaded */
        if (round >= 1 && (round - 1) % REGRAPH == 0) {
            int pick[NUM_OPS];
            if (exec) cu.cuGraphExecDestroy(exec);
            exec = NULL;
            for (i = 0; i < NUM_OPS; i++) pick[i] = i;
            shuffle(pick, NUM_OPS, &w->rng);
            n_graph = 3 + (int)(ref_next64(&w->rng) % 6);
            memset(in_graph, 0, sizeof in_graph);
            for (i = 0; i < n_graph; i++) {
                graph_ops[i] = pick[i];
                in_graph[pick[i]] = 1;
            }
            if (capture(w, graph_ops, n_graph, round, &exec)) {
                n_graph = 0;
                memset(in_graph, 0, sizeof in_graph);
            }
        }
        for (i = 0; i < NUM_OPS; i++)
            if (!exec || !in_graph[i]) order[n++] = i;
        shuffle(order, n, &w->rng);
        graph_at = exec ? (int)(ref_next64(&w->rng) % (uint64_t)(n + 1)) : -1;
        while (pos < n || graph_at == n) {
            if (pos == graph_at) { /* the graph: replays on fresh poison */
                int rep;
                graph_at = -1;
                for (rep = 0; rep < REPLAYS; rep++) {
                    char how[48];
                    int ok = 1;
                    for (i = 0; i < n_graph && ok; i++) ok = !reset(w, graph_ops[i], round);
                    if (!ok) break;
                    if ((r = cu.cuGraphLaunch(exec, w->stream)) || (r = cu.cuStreamSynchronize(w->stream))) {
                        report(w, "thread %d round %d: graph replay: %s", w->id, round, gpu_error(r));
                        break;
                    }
                    snprintf(how, sizeof how, "graph replay %d", rep);
                    for (i = 0; i < n_graph; i++) verify(w, graph_ops[i], round, how);
                    w->replays++;
                    w->graph_runs += n_graph;
                }
                continue;
            }
            { /* up to MAX_BATCH eager ops back to back (not past the graph's place), one sync */
                const int batch = 1 + (int)(ref_next64(&w->rng) % MAX_BATCH);
                int launched[MAX_BATCH], nl = 0, tried = 0, k;
                while (tried < batch && pos + tried < n && pos + tried != graph_at) {
                    const int op = order[pos + tried++];
                    talon_status s;
                    if (reset(w, op, round)) continue;
                    if ((s = op_call(g_shared, w->stream, op, &w->args[op])) != TALON_SUCCESS) {
                        report(w, "thread %d round %d: %s: %s", w->id, round, oc_op_name(op), talon_last_error());
                        continue;
                    }
                    launched[nl++] = op;
                }
                pos += tried;
                if ((r = cu.cuStreamSynchronize(w->stream))) {
                    report(w, "thread %d round %d: cuStreamSynchronize: %s (stopping: the context "
                           "is unusable)", w->id, round, gpu_error(r));
                    stop = 1;
                    break;
                }
                for (k = 0; k < nl; k++) verify(w, launched[k], round, "eager");
                w->eager += nl;
            }
        }
    }
    if (exec) cu.cuGraphExecDestroy(exec);
    return NULL;
}

/* Each op captured on the fresh shared ctx must be refused with TALON_ERROR_NOT_LOADED. */
static int check_not_loaded(worker *w) {
    int op, bad = 0;
    for (op = 0; op < NUM_OPS; op++) {
        CUgraph graph = NULL;
        talon_status s;
        CUresult r = cu.cuStreamBeginCapture(w->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
        if (r) {
            report(NULL, "cuStreamBeginCapture: %s", gpu_error(r));
            return 1;
        }
        s = op_call(g_shared, w->stream, op, &w->args[op]);
        r = cu.cuStreamEndCapture(w->stream, &graph);
        if (graph) cu.cuGraphDestroy(graph);
        if (s != TALON_ERROR_NOT_LOADED || r) {
            report(NULL, "%s captured on a fresh ctx: %s (%s), cuStreamEndCapture: %s; expected "
                   "TALON_ERROR_NOT_LOADED", oc_op_name(op), talon_status_string(s),
                   s == TALON_SUCCESS ? "launched" : talon_last_error(), gpu_error(r));
            bad++;
        }
    }
    return bad;
}

static uint64_t parse_seed(int argc, char **argv) {
    const char *e = argc > 1 ? argv[1] : getenv("TALON_THREADS_SEED");
    struct timespec ts;
    if (e && *e) return strtoull(e, NULL, 0);
    clock_gettime(CLOCK_REALTIME, &ts);
    return ref_mix64((uint64_t)ts.tv_sec * 1000000007ull + (uint64_t)ts.tv_nsec);
}

int main(int argc, char **argv) {
    static worker workers[THREADS];
    pthread_t threads[THREADS];
    gpu_test t;
    const uint64_t seed = parse_seed(argc, argv);
    uint64_t rng = seed;
    long long eager = 0, graph_runs = 0, graphs = 0, relaxed = 0, replays = 0, elements = 0;
    long long gold_elements = 0;
    int failed = 0, op, v, i, started = 0;
    struct timespec t0;
    CUresult r;
    if (gpu_test_begin(&t, "test_gpu_threads", CU_STREAM_NON_BLOCKING)) return 1;
    g_rounds = t.quick ? 6 : 60;
    g_cu = t.g.ctx;
    printf("test_gpu_threads: seed 0x%016llx (rerun: test_gpu_threads 0x%016llx), %d threads x "
           "%d rounds, %d ops x %d shapes\n", (unsigned long long)seed, (unsigned long long)seed,
           THREADS, g_rounds, NUM_OPS, VARIANTS);
    fflush(stdout);
    if ((r = cu.cuMemAlloc(&g_poison, POISON_BYTES)) || (r = cu.cuMemsetD8(g_poison, 0xFF, POISON_BYTES)) ||
        (r = cu.cuCtxSynchronize())) {
        fprintf(stderr, "test_gpu_threads: poison buffer: %s\n", gpu_error(r));
        return 1;
    }
    /* the golden run: every case checked against the references */
    printf("test_gpu_threads: golden run (single thread, preloaded ctx), against the fp64 references:\n");
    for (op = 0; op < NUM_OPS; op++)
        for (v = 0; v < VARIANTS; v++) {
            oc_case c;
            oc_random(&c, op, &rng, 0);
            if (golden_run(t.ctx, t.stream, &g_gold[op][v], &c)) failed++;
            gold_elements += g_gold[op][v].checked;
        }
    if (failed) {
        fprintf(stderr, "test_gpu_threads: %d golden cases failed; no threaded run\n", failed);
        return gpu_test_end(&t, "", 0, 0, failed);
    }
    /* the shared ctx (no preload) and every thread's stream, buffers and arguments */
    if (talon_ctx_create(&g_shared, NULL) != TALON_SUCCESS) {
        fprintf(stderr, "test_gpu_threads: talon_ctx_create: %s\n", talon_last_error());
        return 1;
    }
    for (i = 0; i < THREADS; i++) {
        worker *w = &workers[i];
        w->id = i;
        w->rng = ref_mix64(seed ^ (0x7EAD0000ull + (uint64_t)i));
        if ((r = cu.cuStreamCreate(&w->stream, CU_STREAM_NON_BLOCKING))) {
            fprintf(stderr, "test_gpu_threads: cuStreamCreate: %s\n", gpu_error(r));
            return 1;
        }
        for (op = 0; op < NUM_OPS; op++) {
            const oc_job *j = &g_gold[op][variant_of(w, op)].job;
            if ((r = oc_dev_alloc(j, &w->dev[op])) || oc_img_alloc(j, w->img[op], 0)) {
                fprintf(stderr, "test_gpu_threads: thread %d's buffers of %s: %s\n", i,
                        oc_op_name(op), r ? gpu_error(r) : "out of host memory");
                return 1;
            }
            oc_args(j, &w->dev[op], &w->args[op]);
        }
    }
    failed += check_not_loaded(&workers[0]);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (i = 0; i < THREADS; i++)
        if (pthread_create(&threads[i], NULL, worker_main, &workers[i]) == 0) started++;
        else report(NULL, "pthread_create failed");
    for (i = 0; i < started; i++) pthread_join(threads[i], NULL);
    failed += started != THREADS;
    for (i = 0; i < THREADS; i++) {
        const worker *w = &workers[i];
        eager += w->eager;
        graph_runs += w->graph_runs;
        graphs += w->graphs;
        relaxed += w->relaxed;
        replays += w->replays;
        elements += w->elements;
        failed += (int)w->failures;
    }
    printf("test_gpu_threads: %d threads x %d rounds on one lazily loading talon_ctx, %d ops "
           "(seed 0x%016llx): %lld eager calls, %lld op runs in graphs (%lld graphs captured, "
           "%lld in relaxed mode, %lld thread-local; %lld replays), %lld elements compared bit "
           "for bit with the golden run (whose %lld elements matched the fp64 references), "
           "%d failures, %.1f s\n", THREADS, g_rounds, NUM_OPS, (unsigned long long)seed, eager,
           graph_runs, graphs, relaxed, graphs - relaxed, replays, elements, gold_elements,
           failed, gpu_seconds_since(&t0));
    /* teardown: no op runs on the shared ctx any more */
    for (i = 0; i < THREADS; i++) {
        for (op = 0; op < NUM_OPS; op++) {
            oc_dev_free(&g_gold[op][variant_of(&workers[i], op)].job, &workers[i].dev[op]);
            oc_img_free(workers[i].img[op]);
        }
        cu.cuStreamDestroy(workers[i].stream);
    }
    talon_ctx_destroy(g_shared);
    for (op = 0; op < NUM_OPS; op++)
        for (v = 0; v < VARIANTS; v++) {
            oc_img_free(g_gold[op][v].img);
            oc_free(&g_gold[op][v].job);
        }
    cu.cuMemFree(g_poison);
    return gpu_test_end(&t, " bit for bit against the golden run", eager + graph_runs, elements, failed);
}
