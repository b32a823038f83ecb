/* GPU soak test (H100/H200) of talon (issue 24, item 5): for TALON_SOAK_SECONDS (default 600;
   TALON_TEST_QUICK=1: 20, for compute-sanitizer) call random ops of talon.h with random valid
   shapes (op_cases.h: odd sizes, strides, offsets, every dtype, mode and path an op takes, up
   to a few million elements), one after the other on one preloaded ctx, and check
   - every call: talon's status and the stream's (a launch or kernel error fails the run);
   - every TALON_SOAK_CHECK_EVERY-th call (default 2): every output element against the fp64
     references of tests/<family>/ref_*.c with the family tests' tolerances (exact where the
     op is exact), outputs poisoned with 0xFF bytes before the launch, padding, guards and
     inputs unchanged; attention and GEMM problems larger than the host budget are compared
     on evenly spread rows (3e7 multiply-adds) and the other rows checked for being written;
   - one call in 8 goes through a CUDA graph (captured, instantiated, replayed once or twice,
     destroyed): each checked replay against the references, and a second replay bit for bit
     against the first;
   - after a warm-up (a tenth of the run, 5 to 60 s, and 40 calls at least), neither the
     device's free memory (cuMemGetInfo) nor the process's resident memory may shrink resp.
     grow by more than 4 MiB resp. 8 MiB (TALON_SOAK_DEVICE_MIB, TALON_SOAK_HOST_MIB):
     measured between calls, when no call's buffer is allocated (a run too short to finish
     the warm-up says so and skips this check). The run's time counts from its first call
     (after the preload).
   Memory: every buffer of a call is its own cuMemAlloc, freed after the call (so that
   compute-sanitizer sees any access past a buffer, and allocation churn is part of the soak);
   host images are malloc'd per call, with glibc told to map every block of 256 KiB or more
   (returned to the system when freed), so that the heap's high-water mark does not read as
   growth.
   Reproducible: call i draws everything from hash(seed, i). The seed is printed at the start;
   set it with the first argument or TALON_SOAK_SEED, and TALON_SOAK_FIRST=i starts at call i
   (a failure names its call). Progress every 60 s (quick: 5 s), a summary at the end; the exit
   status is non-zero on any mismatch, error status or growth. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "op_cases.h"

#define POISON_BYTES ((size_t)4 << 20)
#define CHECK_BUDGET 3e7 /* host multiply-adds per attention/GEMM check */
#define MAX_PRINTED 20
#define WARM_CALLS 40    /* calls before the memory baseline, besides the warm-up time */

static talon_ctx *g_ctx;
static CUstream g_stream;
static CUdeviceptr g_poison;

typedef struct totals {
    long long calls, checked, graphs, replays, elements, failures;
    long long per_op[NUM_OPS];
} totals;

static double env_number(const char *name, double fallback) {
    const char *e = getenv(name);
    return e && *e ? strtod(e, NULL) : fallback;
}

static void fail_call(totals *t, long long call, const oc_case *c, const char *what) {
    char desc[700];
    t->failures++;
    if (t->failures > MAX_PRINTED) return;
    oc_describe(c, desc, sizeof desc);
    fprintf(stderr, "test_gpu_soak: FAILED call %lld (%s): %s\n", call, desc, what);
    if (t->failures == MAX_PRINTED) fprintf(stderr, "test_gpu_soak: (further failures not printed)\n");
}

/* One call: a random case of a random op, run eagerly or through a graph; checked when
   `check`. Returns -1 on a driver error that leaves the context unusable. */
static int soak_call(totals *t, long long call, uint64_t seed, int check) {
    uint64_t s = ref_mix64(seed ^ ref_mix64((uint64_t)call + 1));
    const int op = (int)(ref_next64(&s) % NUM_OPS);
    const int graph = ref_next64(&s) % 8 == 0;
    const int replays = graph ? 1 + (int)(ref_next64(&s) % 2) : 1;
    char what[600];
    oc_case c;
    oc_job j;
    oc_dev d;
    op_args a;
    uint8_t *img[OC_MAXBUF], *first[OC_MAXBUF];
    CUgraph g = NULL;
    CUgraphExec exec = NULL;
    CUresult r = CUDA_SUCCESS;
    int rep, i, sticky = 0;
    oc_random(&c, op, &s, 1);
    t->calls++;
    t->per_op[op]++;
    for (i = 0; i < OC_MAXBUF; i++) img[i] = first[i] = NULL;
    if (oc_build(&j, &c, g_ctx)) {
        fail_call(t, call, &c, "building the case failed");
        return 0;
    }
    if ((r = oc_dev_alloc(&j, &d))) {
        snprintf(what, sizeof what, "device buffers (%.1f MiB): %s", (double)oc_dev_bytes(&j) / 1048576.0,
                 gpu_error(r));
        fail_call(t, call, &c, what);
        oc_free(&j);
        return r == CUDA_ERROR_OUT_OF_MEMORY ? 0 : -1;
    }
    oc_args(&j, &d, &a);
    if (check && (oc_img_alloc(&j, img, 1) || (graph && replays > 1 && oc_img_alloc(&j, first, 0)))) {
        fail_call(t, call, &c, "out of host memory");
        goto done;
    }
    if (graph) {
        talon_status st = TALON_SUCCESS;
        if ((r = cu.cuStreamBeginCapture(g_stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL))) {
            snprintf(what, sizeof what, "cuStreamBeginCapture: %s", gpu_error(r));
            fail_call(t, call, &c, what);
            goto done;
        }
        st = op_call(g_ctx, g_stream, op, &a);
        if (st != TALON_SUCCESS) snprintf(what, sizeof what, "inside a capture: %s", talon_last_error());
        r = cu.cuStreamEndCapture(g_stream, &g);
        if (!r && st == TALON_SUCCESS) r = cu.cuGraphInstantiateWithFlags(&exec, g, 0);
        if (st != TALON_SUCCESS || r) {
            if (st == TALON_SUCCESS) snprintf(what, sizeof what, "capture: %s", gpu_error(r));
            fail_call(t, call, &c, what);
            goto done;
        }
        t->graphs++;
    }
    for (rep = 0; rep < replays; rep++) {
        talon_status st = TALON_SUCCESS;
        if ((r = oc_dev_reset(&j, &d, g_stream, g_poison, POISON_BYTES))) break;
        if (graph) r = cu.cuGraphLaunch(exec, g_stream);
        else st = op_call(g_ctx, g_stream, op, &a);
        if (st != TALON_SUCCESS) {
            snprintf(what, sizeof what, "%s", talon_last_error());
            fail_call(t, call, &c, what);
            break;
        }
        if (r || (r = cu.cuStreamSynchronize(g_stream))) break;
        t->replays += graph;
        if (!check) continue;
        if ((r = oc_dev_download(&j, &d, img))) break;
        {
            oc_stats stt;
            memset(&stt, 0, sizeof stt);
            oc_check(&j, img, &stt, CHECK_BUDGET);
            t->elements += stt.elements;
            if (stt.bad) {
                snprintf(what, sizeof what, "%s%lld mismatches; first: %s", graph ? "graph replay: " : "",
                         (long long)stt.bad, stt.first);
                fail_call(t, call, &c, what);
                break;
            }
        }
        if (graph && replays > 1) { /* the replays agree bit for bit */
            oc_canon(&j, img);
            for (i = 0; i < j.nbuf; i++) {
                if (!first[i]) continue;
                if (rep == 0) memcpy(first[i], img[i], j.b[i].bytes);
                else if (memcmp(first[i], img[i], j.b[i].bytes)) {
                    snprintf(what, sizeof what, "graph replay %d differs from replay 0 in %s", rep, j.b[i].name);
                    fail_call(t, call, &c, what);
                    break;
                }
            }
        }
    }
    if (r) {
        snprintf(what, sizeof what, "driver: %s", gpu_error(r));
        fail_call(t, call, &c, what);
        sticky = 1; /* a launch or kernel error: the context is unusable */
    }
    t->checked += check;
done:
    if (exec) cu.cuGraphExecDestroy(exec);
    if (g) cu.cuGraphDestroy(g);
    oc_img_free(img);
    oc_img_free(first);
    oc_dev_free(&j, &d);
    oc_free(&j);
    return sticky ? -1 : 0;
}

static void print_progress(const char *prog, double secs, const totals *t, double dev_mib,
                           double host_mib, int measured) {
    char ops[1200];
    size_t k = 0;
    int op;
    for (op = 0; op < NUM_OPS && k < sizeof ops; op++)
        k += (size_t)snprintf(ops + k, sizeof ops - k, "%s%s %lld", op ? ", " : "",
                              oc_op_name(op) + 6 /* "talon_" */, t->per_op[op]);
    printf("%s: %.0f s: %lld calls (%lld checked, %lld graphs, %lld elements compared), %lld "
           "failures; %s", prog, secs, t->calls, t->checked, t->graphs, t->elements, t->failures,
           ops);
    if (measured)
        printf("; since the warm-up: device free memory %+.2f MiB, host resident %+.2f MiB", dev_mib,
               host_mib);
    printf("\n");
    fflush(stdout);
}

int main(int argc, char **argv) {
    gpu_test t;
    totals tot;
    const char *seed_text = argc > 1 ? argv[1] : getenv("TALON_SOAK_SEED");
    uint64_t seed;
    double seconds, warm, interval, next_print, dev_bound, host_bound;
    double worst_dev = 0, worst_host = 0;
    long long call, check_every;
    size_t free0 = 0, free1 = 0, total = 0;
    long rss0 = 0, rss1 = 0;
    int measured = 0, failed;
    struct timespec t_start;
    CUresult r;
    memset(&tot, 0, sizeof tot);
    /* big host blocks straight from mmap: freed ones go back to the system at once */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
    if (gpu_test_begin(&t, "test_gpu_soak", CU_STREAM_NON_BLOCKING)) return 1;
    g_ctx = t.ctx;
    g_stream = t.stream;
    if (seed_text && *seed_text) {
        seed = strtoull(seed_text, NULL, 0);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = ref_mix64((uint64_t)ts.tv_sec * 1000000007ull + (uint64_t)ts.tv_nsec);
    }
    seconds = env_number("TALON_SOAK_SECONDS", t.quick ? 20 : 600);
    check_every = (long long)env_number("TALON_SOAK_CHECK_EVERY", 2);
    if (check_every < 1) check_every = 1;
    call = (long long)env_number("TALON_SOAK_FIRST", 0);
    dev_bound = env_number("TALON_SOAK_DEVICE_MIB", 4) * 1048576.0;
    host_bound = env_number("TALON_SOAK_HOST_MIB", 8) * 1048576.0;
    warm = seconds / 10 < 5 ? 5 : seconds / 10 > 60 ? 60 : seconds / 10;
    interval = t.quick ? 5 : 60;
    printf("test_gpu_soak: seed 0x%016llx (rerun: TALON_SOAK_SEED=0x%016llx), %.0f s from call "
           "%lld, every %lld%s call checked against the fp64 references, warm-up %.0f s, growth "
           "bounds %.0f MiB device / %.0f MiB host\n", (unsigned long long)seed,
           (unsigned long long)seed, seconds, call, check_every,
           check_every == 1 ? "" : check_every == 2 ? "nd" : check_every == 3 ? "rd" : "th", warm,
           dev_bound / 1048576.0, host_bound / 1048576.0);
    fflush(stdout);
    if ((r = cu.cuMemAlloc(&g_poison, POISON_BYTES)) || (r = cu.cuMemsetD8(g_poison, 0xFF, POISON_BYTES)) ||
        (r = cu.cuCtxSynchronize())) {
        fprintf(stderr, "test_gpu_soak: poison buffer: %s\n", gpu_error(r));
        return 1;
    }
    next_print = interval;
    clock_gettime(CLOCK_MONOTONIC, &t_start); /* the run's clock starts at its first call */
    for (;; call++) {
        const double now = gpu_seconds_since(&t_start);
        if (now >= seconds) break;
        if (!measured && now >= warm && tot.calls >= WARM_CALLS) { /* the baseline, between two calls */
            if ((r = cu.cuMemGetInfo(&free0, &total))) {
                fprintf(stderr, "test_gpu_soak: cuMemGetInfo: %s\n", gpu_error(r));
                tot.failures++;
                break;
            }
            rss0 = gpu_resident_bytes();
            measured = 1;
        }
        if (now >= next_print) {
            double dev_mib = 0, host_mib = 0;
            if (measured && !cu.cuMemGetInfo(&free1, &total)) {
                dev_mib = ((double)free1 - (double)free0) / 1048576.0;
                host_mib = ((double)gpu_resident_bytes() - (double)rss0) / 1048576.0;
            }
            print_progress("test_gpu_soak", now, &tot, dev_mib, host_mib, measured);
            next_print += interval;
        }
        if (soak_call(&tot, call, seed, call % check_every == 0)) break;
        if (measured && call % 64 == 0 && !cu.cuMemGetInfo(&free1, &total)) { /* worst seen */
            const long rss = gpu_resident_bytes();
            if ((double)free0 - (double)free1 > worst_dev) worst_dev = (double)free0 - (double)free1;
            if ((double)rss - (double)rss0 > worst_host) worst_host = (double)rss - (double)rss0;
        }
    }
    if ((r = cu.cuMemGetInfo(&free1, &total))) {
        fprintf(stderr, "test_gpu_soak: cuMemGetInfo: %s\n", gpu_error(r));
        tot.failures++;
    }
    rss1 = gpu_resident_bytes();
    print_progress("test_gpu_soak", gpu_seconds_since(&t_start), &tot,
                   ((double)free1 - (double)free0) / 1048576.0, ((double)rss1 - (double)rss0) / 1048576.0,
                   measured);
    failed = tot.failures > 0;
    if (!measured) { /* e.g. a short run under compute-sanitizer: its other checks stand */
        printf("test_gpu_soak: the run ended before the warm-up (%.0f s and %d calls) did: memory "
               "growth not measured\n", warm, WARM_CALLS);
    } else {
        printf("test_gpu_soak: memory from the warm-up to the end: device free %+.2f MiB (worst "
               "%+.2f), host resident %+.2f MiB (worst %+.2f); bounds -%.0f / +%.0f MiB\n",
               ((double)free1 - (double)free0) / 1048576.0, -worst_dev / 1048576.0,
               ((double)rss1 - (double)rss0) / 1048576.0, worst_host / 1048576.0,
               dev_bound / 1048576.0, host_bound / 1048576.0);
        if ((double)free0 - (double)free1 > dev_bound) {
            fprintf(stderr, "test_gpu_soak: FAILED: the device's free memory shrank by %.2f MiB\n",
                    ((double)free0 - (double)free1) / 1048576.0);
            failed = 1;
        }
        if (rss0 <= 0 || rss1 <= 0 || (double)rss1 - (double)rss0 > host_bound) {
            fprintf(stderr, "test_gpu_soak: FAILED: the resident host memory grew by %.2f MiB\n",
                    ((double)rss1 - (double)rss0) / 1048576.0);
            failed = 1;
        }
    }
    printf("test_gpu_soak: seed 0x%016llx, %.0f s, %lld calls of %d ops (%lld checked against "
           "the fp64 references, %lld through graphs: %lld replays), %lld failures%s\n",
           (unsigned long long)seed, gpu_seconds_since(&t_start), tot.calls, NUM_OPS, tot.checked,
           tot.graphs, tot.replays, tot.failures, failed ? ": FAILED" : "");
    cu.cuMemFree(g_poison);
    return gpu_test_end(&t, " against the fp64 references", tot.calls, tot.elements, failed);
}
