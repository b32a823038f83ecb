/* GPU tests (H100/H200) for talon_moe_align_block_size and talon_moe_sum.

   moe_align: every output element is compared exactly with the CPU reference
   (tests/moe/ref_moe.h): all sorted_capacity slots (ids in ascending order inside each group, every
   sentinel), all expert_ids_capacity blocks (-1 past num_tokens_post_padded / block_size) and
   the count; 64 elements past each capacity must keep their poison. Outputs are poisoned
   with 0xA5 bytes before every launch. Shapes: tokens 1/7/111/4096/65536 x experts
   1/7/64/256/512 x block 1/16/64/128/256 x k 1/8 with ~10% invalid ids (-1, experts,
   INT32_MAX, INT32_MIN, ...) mixed in; then adversarial sets: no valid id at all, one expert
   chosen by every pair, heavy skew, k up to 64 on both sides of each kernel's id limit,
   capacities larger than needed; sorted_token_ids offset by 0-4 elements (the 16-byte sentinel
   stores' head and tail), with the elements before it checked untouched too.
   moe_sum: every output element against the fp64 reference of the quantised inputs,
   |dev - ref| <= atol + rtol |ref| + 2^-18 sum_j |w_j x_j| (rtol one unit in the last place
   of the output type, the last term far below it: what fp32 accumulation of k terms may lose);
   NaN poison before the launch, a guard after the output that must stay untouched.
   Graph capture: both ops (the small and the cluster align kernels) in one graph, replayed twice on fresh inputs.

   TALON_TEST_QUICK=1 (compute-sanitizer) shrinks the grids; all four align kernels, both moe_sum
   paths, every adversarial set and the graph are still covered. */
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
#include "gpu.h"
#include "ref.h"
#include "ref_moe.h"
#include "talon.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define GUARD 64 /* poisoned elements after each output that must stay untouched */
#define POISON 0xA5A5A5A5u
#define MAX_PRINTED 8

static talon_ctx *g_ctx;
static CUstream g_stream;
static int g_quick;
static int64_t g_cases, g_elements;

#define CHECK_CU(call)                                                                         \
    do {                                                                                       \
        CUresult e_ = (call);                                                                  \
        if (e_ != CUDA_SUCCESS) fail_msg("%s failed: %s", #call, gpu_error(e_));               \
    } while (0)

typedef struct tally {
    const char *test;
    int64_t cases, failures, elements;
    double worst; /* moe_sum: max |dev - ref| / tolerance */
} tally;

static void tally_end(tally *t) {
    if (t->worst >= 0)
        print_message("%s: %lld cases, %lld elements checked, worst error %.3f of the tolerance, "
                      "%lld failed\n", t->test, (long long)t->cases, (long long)t->elements,
                      t->worst, (long long)t->failures);
    else
        print_message("%s: %lld cases, %lld elements checked, every one exact, %lld failed\n",
                      t->test, (long long)t->cases, (long long)t->elements,
                      (long long)t->failures);
    g_cases += t->cases;
    g_elements += t->elements;
    if (t->failures) fail();
}

/* ================================================================ moe_align */
enum dist { D_MIXED, D_VALID, D_NONE, D_ONE, D_SKEW };
static const char *const dist_name[] = {"uniform + 10% invalid", "uniform valid",
                                        "no valid id", "one expert for all", "90% one expert"};

typedef struct align_case {
    int64_t tokens, k, experts, block;
    enum dist dist;
    int64_t extra; /* capacity beyond the worst case */
    uint64_t seed;
    int64_t offset; /* sorted_token_ids starts this many elements past a 256-byte boundary */
} align_case;

static void make_ids(const align_case *c, int32_t *ids) {
    const int64_t n = c->tokens * c->k;
    static const int32_t bad[] = {-1, -1, -2, 0, 1, INT32_MAX, INT32_MIN, -1000};
    uint64_t s = c->seed;
    int64_t i;
    for (i = 0; i < n; i++) {
        const uint64_t r = ref_next64(&s);
        const int32_t u = (int32_t)((r >> 8) % (uint64_t)c->experts);
        switch (c->dist) {
        case D_MIXED:
            if (r % 10 == 0) {
                int32_t b = bad[(r >> 40) % COUNT(bad)];
                ids[i] = b == 0 ? (int32_t)c->experts : b == 1 ? (int32_t)c->experts + 7 : b;
            } else {
                ids[i] = u;
            }
            break;
        case D_VALID: ids[i] = u; break;
        case D_NONE: ids[i] = r % 2 ? -1 : (int32_t)(c->experts + (int64_t)(r >> 60)); break;
        case D_ONE: ids[i] = (int32_t)(c->experts - 1); break;
        case D_SKEW: ids[i] = r % 10 ? (int32_t)(3 % c->experts) : u; break;
        }
    }
}

static void describe_align(const align_case *c, char *buf, size_t n) {
    snprintf(buf, n, "tokens %lld k %lld experts %lld block %lld, %s, capacity +%lld, offset %lld",
             (long long)c->tokens, (long long)c->k, (long long)c->experts, (long long)c->block,
             dist_name[c->dist], (long long)c->extra, (long long)c->offset);
}

/* Device buffers of one align case; the outputs carry GUARD elements of poison. */
typedef struct align_job {
    align_case c;
    int64_t scap, ecap;
    CUdeviceptr ids, sorted_mem, sorted, eids, npost; /* sorted = sorted_mem + offset */
    int32_t *h_ids;
} align_job;

static int align_prepare(align_job *j, const align_case *c) {
    memset(j, 0, sizeof *j);
    j->c = *c;
    if (talon_moe_align_block_size_capacity(c->tokens, c->k, c->experts, c->block, &j->scap,
                                            &j->ecap) != TALON_SUCCESS)
        return -1;
    j->scap += c->extra;
    j->ecap += c->extra;
    j->h_ids = (int32_t *)malloc((size_t)(c->tokens * c->k) * 4);
    if (!j->h_ids) return -1;
    make_ids(c, j->h_ids);
    if (cu.cuMemAlloc(&j->ids, (size_t)(c->tokens * c->k) * 4) ||
        cu.cuMemAlloc(&j->sorted_mem, (size_t)(c->offset + j->scap + GUARD) * 4) ||
        cu.cuMemAlloc(&j->eids, (size_t)(j->ecap + GUARD) * 4) ||
        cu.cuMemAlloc(&j->npost, (1 + GUARD) * 4))
        return -1;
    j->sorted = j->sorted_mem + (CUdeviceptr)c->offset * 4;
    return cu.cuMemcpyHtoD(j->ids, j->h_ids, (size_t)(c->tokens * c->k) * 4) ? -1 : 0;
}

static int align_poison(align_job *j) {
    return cu.cuMemsetD8(j->sorted_mem, 0xA5, (size_t)(j->c.offset + j->scap + GUARD) * 4) ||
                   cu.cuMemsetD8(j->eids, 0xA5, (size_t)(j->ecap + GUARD) * 4) ||
                   cu.cuMemsetD8(j->npost, 0xA5, (1 + GUARD) * 4)
               ? -1
               : 0;
}

static talon_status align_launch(align_job *j, talon_ctx *ctx, CUstream s) {
    talon_moe_align_block_size_args a;
    memset(&a, 0, sizeof a);
    a.sorted_token_ids = j->sorted;
    a.expert_ids = j->eids;
    a.num_tokens_post_padded = j->npost;
    a.topk_ids = j->ids;
    a.tokens = j->c.tokens;
    a.k = j->c.k;
    a.experts = j->c.experts;
    a.block_size = j->c.block;
    a.sorted_capacity = j->scap;
    a.expert_ids_capacity = j->ecap;
    return talon_moe_align_block_size(ctx, s, &a);
}

static void align_free(align_job *j) {
    if (j->ids) cu.cuMemFree(j->ids);
    if (j->sorted_mem) cu.cuMemFree(j->sorted_mem);
    if (j->eids) cu.cuMemFree(j->eids);
    if (j->npost) cu.cuMemFree(j->npost);
    free(j->h_ids);
    memset(j, 0, sizeof *j);
}

/* Compares one array; prints the first mismatch. */
static int64_t compare_i32(const char *what, const int32_t *dev, const int32_t *ref, int64_t n,
                           int64_t guard, char *first, size_t firstlen) {
    int64_t i, bad = 0;
    for (i = 0; i < n + guard; i++) {
        const int32_t want = i < n ? ref[i] : (int32_t)POISON;
        if (dev[i] != want) {
            if (!bad && !first[0])
                snprintf(first, firstlen, "%s[%lld] = %d, expected %d%s", what, (long long)i,
                         dev[i], want, i < n ? "" : " (guard past the capacity)");
            bad++;
        }
    }
    return bad;
}

/* Downloads and checks every element; 0 on pass. */
static int align_check(align_job *j, tally *t) {
    const int64_t n = j->c.tokens * j->c.k, off = j->c.offset;
    int32_t *d_mem = (int32_t *)malloc((size_t)(off + j->scap + GUARD) * 4), *d_sorted = d_mem + off;
    int32_t *d_eids = (int32_t *)malloc((size_t)(j->ecap + GUARD) * 4);
    int32_t *r_sorted = (int32_t *)malloc((size_t)j->scap * 4);
    int32_t *r_eids = (int32_t *)malloc((size_t)j->ecap * 4);
    int32_t d_npost[1 + GUARD] = {0}, r_npost = -1;
    char first[256] = "", desc[200];
    int64_t bad = -1;
    (void)n;
    if (d_mem && d_eids && r_sorted && r_eids &&
        !cu.cuMemcpyDtoH(d_mem, j->sorted_mem, (size_t)(off + j->scap + GUARD) * 4) &&
        !cu.cuMemcpyDtoH(d_eids, j->eids, (size_t)(j->ecap + GUARD) * 4) &&
        !cu.cuMemcpyDtoH(d_npost, j->npost, sizeof d_npost) &&
        !ref_moe_align(j->h_ids, j->c.tokens, j->c.k, j->c.experts, j->c.block, r_sorted,
                       j->scap, r_eids, j->ecap, &r_npost)) {
        bad = compare_i32("num_tokens_post_padded", d_npost, &r_npost, 1, GUARD, first,
                          sizeof first);
        bad += compare_i32("before sorted_token_ids", d_mem, NULL, 0, off, first, sizeof first);
        bad += compare_i32("sorted_token_ids", d_sorted, r_sorted, j->scap, GUARD, first,
                           sizeof first);
        bad += compare_i32("expert_ids", d_eids, r_eids, j->ecap, GUARD, first, sizeof first);
        t->elements += off + j->scap + j->ecap + 1;
    } else {
        snprintf(first, sizeof first, "download or reference failed");
    }
    t->cases++;
    if (bad && t->failures++ < MAX_PRINTED) {
        describe_align(&j->c, desc, sizeof desc);
        print_error("FAILED moe_align %s: %lld mismatches (num_post %d, reference %d); first: %s\n",
                    desc, (long long)bad, d_npost[0], r_npost, first);
    }
    free(d_mem);
    free(d_eids);
    free(r_sorted);
    free(r_eids);
    return bad ? -1 : 0;
}

static void run_align(tally *t, const align_case *c) {
    align_job j;
    char desc[200];
    talon_status st = TALON_ERROR_DRIVER;
    if (align_prepare(&j, c) == 0 && align_poison(&j) == 0 &&
        (st = align_launch(&j, g_ctx, g_stream)) == TALON_SUCCESS &&
        cu.cuStreamSynchronize(g_stream) == CUDA_SUCCESS) {
        align_check(&j, t);
    } else {
        describe_align(c, desc, sizeof desc);
        print_error("FAILED moe_align %s: launch: %s %s\n", desc, talon_status_string(st),
                    talon_last_error());
        t->cases++;
        t->failures++;
    }
    align_free(&j);
}

static uint64_t seed_of(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
    uint64_t h = 0x243F6A8885A308D3ull;
    h = ref_mix64(h ^ (uint64_t)a);
    h = ref_mix64(h ^ (uint64_t)b);
    h = ref_mix64(h ^ (uint64_t)c);
    h = ref_mix64(h ^ (uint64_t)d);
    return ref_mix64(h ^ (uint64_t)e);
}

static void test_align_grid(void **state) {
    static const int64_t tokens_full[] = {1, 7, 111, 4096, 65536};
    static const int64_t experts_full[] = {1, 7, 64, 256, 512};
    static const int64_t block_full[] = {1, 16, 64, 128, 256};
    static const int64_t tokens_quick[] = {1, 7, 111, 4096};
    static const int64_t experts_quick[] = {1, 7, 512};
    static const int64_t block_quick[] = {1, 64, 256};
    static const int64_t ks[] = {1, 8};
    tally t = {"moe_align grid", 0, 0, 0, -1};
    int a, b, c, d;
    (void)state;
    for (a = 0; a < (g_quick ? COUNT(tokens_quick) : COUNT(tokens_full)); a++)
        for (b = 0; b < (g_quick ? COUNT(experts_quick) : COUNT(experts_full)); b++)
            for (c = 0; c < (g_quick ? COUNT(block_quick) : COUNT(block_full)); c++)
                for (d = 0; d < COUNT(ks); d++) {
                    align_case x;
                    x.tokens = g_quick ? tokens_quick[a] : tokens_full[a];
                    x.experts = g_quick ? experts_quick[b] : experts_full[b];
                    x.block = g_quick ? block_quick[c] : block_full[c];
                    x.k = ks[d];
                    x.dist = (a + b + c + d) % 3 == 0 ? D_VALID : D_MIXED;
                    x.extra = 0;
                    x.offset = (a + c + d) % 4;
                    x.seed = seed_of(x.tokens, x.experts, x.block, x.k, 1);
                    run_align(&t, &x);
                }
    tally_end(&t);
}

static void test_align_adversarial(void **state) {
    static const int64_t tokens[] = {1, 7, 111, 4096, 65536};
    static const int64_t experts[] = {1, 7, 256, 512};
    static const int64_t blocks[] = {1, 16, 256};
    static const int64_t ks[] = {1, 2, 6, 16, 64};
    static const enum dist dists[] = {D_NONE, D_ONE, D_SKEW};
    tally t = {"moe_align adversarial", 0, 0, 0, -1};
    int a, b, c, d;
    (void)state;
    for (d = 0; d < COUNT(dists); d++)
        for (a = 0; a < COUNT(tokens); a++)
            for (b = 0; b < COUNT(experts); b++)
                for (c = 0; c < COUNT(blocks); c++) {
                    align_case x = {tokens[a], 8, experts[b], blocks[c], dists[d], 0, 0, 0};
                    if (g_quick && (tokens[a] > 4096 || tokens[a] == 7 || b % 2)) continue;
                    x.seed = seed_of(x.tokens, x.experts, x.block, (int64_t)x.dist, 2);
                    run_align(&t, &x);
                }
    /* k from 1 to 64, tokens * k around 512 ids (where the small kernel starts staging) and on
       both sides of the small (2048 ids), c8 (32768) and c8w (131072) limits */
    for (a = 0; a < COUNT(ks); a++)
        for (b = 0; b < 9; b++) {
            const int64_t tk[] = {111, 32768 / ks[a], 32768 / ks[a] + 1, 2048 / ks[a],
                                  2048 / ks[a] + 1, 512 / ks[a], 512 / ks[a] + 1,
                                  131072 / ks[a], 131072 / ks[a] + 1};
            align_case x = {tk[b] > 0 ? tk[b] : 1, ks[a], 64, 16, D_MIXED, 0, 0, b % 5};
            if (x.tokens > 65536 || (g_quick && ((ks[a] == 64 && b == 0) || b >= 7))) continue;
            x.seed = seed_of(x.tokens, x.k, b, 3, 3);
            run_align(&t, &x);
        }
    {
        align_case x = {g_quick ? 4096 : 65536, 64, 512, 128, D_MIXED, 0, 0, 0};
        x.seed = 77;
        run_align(&t, &x); /* the largest problem: 4M ids (quick: 262144) */
    }
    /* capacities beyond the worst case: the sentinel / -1 fill runs to the caller's capacity */
    for (a = 0; a < 3; a++) {
        align_case x = {a == 0 ? 16 : a == 1 ? 4096 : 300, 8, 256, 64, D_MIXED, 1000 + 37 * a, 0,
                        a + 1};
        x.seed = seed_of(a, 4, 4, 4, 4);
        run_align(&t, &x);
    }
    tally_end(&t);
}

/* ================================================================ moe_sum */
typedef struct sum_case {
    talon_dtype dtype;
    int64_t tokens, k, hidden;
    int weighted;
    int offset; /* elements added to in and out: 1 forces the element-wise path */
    uint64_t seed;
} sum_case;

typedef struct sum_job {
    sum_case c;
    CUdeviceptr in, out, w;
    uint16_t *h_in, *h_out;
    float *h_w;
    int64_t nin, nout;
} sum_job;

static int sum_prepare(sum_job *j, const sum_case *c) {
    uint64_t s = c->seed;
    int64_t i;
    memset(j, 0, sizeof *j);
    j->c = *c;
    j->nin = c->tokens * c->k * c->hidden;
    j->nout = c->tokens * c->hidden;
    j->h_in = (uint16_t *)malloc((size_t)j->nin * 2);
    j->h_out = (uint16_t *)malloc((size_t)(j->nout + GUARD) * 2);
    j->h_w = (float *)malloc((size_t)(c->tokens * c->k) * 4);
    if (!j->h_in || !j->h_out || !j->h_w) return -1;
    for (i = 0; i < j->nin; i++)
        j->h_in[i] = ref_from_f32(c->dtype, 2.f * ref_unit01(&s) - 1.f);
    for (i = 0; i < c->tokens * c->k; i++) j->h_w[i] = ref_unit01(&s);
    if (cu.cuMemAlloc(&j->in, (size_t)(j->nin + c->offset) * 2) ||
        cu.cuMemAlloc(&j->out, (size_t)(j->nout + c->offset + GUARD) * 2) ||
        cu.cuMemAlloc(&j->w, (size_t)(c->tokens * c->k) * 4))
        return -1;
    return cu.cuMemcpyHtoD(j->in + 2 * (CUdeviceptr)c->offset, j->h_in, (size_t)j->nin * 2) ||
                   cu.cuMemcpyHtoD(j->w, j->h_w, (size_t)(c->tokens * c->k) * 4)
               ? -1
               : 0;
}

static int sum_poison(sum_job *j) {
    return cu.cuMemsetD8(j->out, 0xFF, (size_t)(j->nout + j->c.offset + GUARD) * 2) ? -1 : 0;
}

static talon_status sum_launch(sum_job *j, talon_ctx *ctx, CUstream s) {
    talon_moe_sum_args a;
    memset(&a, 0, sizeof a);
    a.out = j->out + 2 * (CUdeviceptr)j->c.offset;
    a.in = j->in + 2 * (CUdeviceptr)j->c.offset;
    a.weights = j->c.weighted ? j->w : 0;
    a.tokens = j->c.tokens;
    a.k = j->c.k;
    a.hidden = j->c.hidden;
    a.dtype = j->c.dtype;
    return talon_moe_sum(ctx, s, &a);
}

static void sum_free(sum_job *j) {
    if (j->in) cu.cuMemFree(j->in);
    if (j->out) cu.cuMemFree(j->out);
    if (j->w) cu.cuMemFree(j->w);
    free(j->h_in);
    free(j->h_out);
    free(j->h_w);
    memset(j, 0, sizeof *j);
}

static void describe_sum(const sum_case *c, char *buf, size_t n) {
    snprintf(buf, n, "%s tokens %lld k %lld hidden %lld, %s, offset %d",
             c->dtype == TALON_DTYPE_BF16 ? "bf16" : "f16", (long long)c->tokens,
             (long long)c->k, (long long)c->hidden, c->weighted ? "weighted" : "plain sum",
             c->offset);
}

static int sum_check(sum_job *j, tally *t) {
    const sum_case *c = &j->c;
    const double rtol = ref_rtol(c->dtype);
    const double atol = ref_atol(c->dtype);
    double *x = (double *)malloc((size_t)j->nin * sizeof(double));
    double *w = (double *)malloc((size_t)(c->tokens * c->k) * sizeof(double));
    double *ref = (double *)malloc((size_t)j->nout * sizeof(double));
    double *mag = (double *)malloc((size_t)j->nout * sizeof(double));
    uint16_t *dev = j->h_out;
    int64_t i, bad = 0;
    char first[256] = "", desc[200];
    if (!x || !w || !ref || !mag ||
        cu.cuMemcpyDtoH(dev, j->out + 2 * (CUdeviceptr)c->offset, (size_t)(j->nout + GUARD) * 2)) {
        bad = -1;
        snprintf(first, sizeof first, "download failed");
    } else {
        for (i = 0; i < j->nin; i++) x[i] = ref_to_f32(c->dtype, j->h_in[i]);
        for (i = 0; i < c->tokens * c->k; i++) w[i] = j->h_w[i];
        ref_moe_sum(x, c->weighted ? w : NULL, ref, mag, c->tokens, c->k, c->hidden);
        for (i = 0; i < j->nout + GUARD; i++) {
            if (i >= j->nout) {
                if (dev[i] != 0xFFFF) {
                    if (!bad) snprintf(first, sizeof first, "guard element %lld written",
                                       (long long)(i - j->nout));
                    bad++;
                }
                continue;
            }
            {
                const double d = ref_to_f32(c->dtype, dev[i]);
                const double tol = atol + rtol * fabs(ref[i]) + 0x1p-18 * mag[i];
                const double err = fabs(d - ref[i]);
                if (!(err <= tol)) {
                    if (!bad)
                        snprintf(first, sizeof first, "out[%lld, %lld] = %.8g (0x%04x), expected %.8g",
                                 (long long)(i / c->hidden), (long long)(i % c->hidden), d, dev[i],
                                 ref[i]);
                    bad++;
                } else if (err / tol > t->worst) {
                    t->worst = err / tol;
                }
            }
        }
        t->elements += j->nout;
    }
    t->cases++;
    if (bad && t->failures++ < MAX_PRINTED) {
        describe_sum(c, desc, sizeof desc);
        print_error("FAILED moe_sum %s: %lld mismatches; first: %s\n", desc, (long long)bad, first);
    }
    free(x);
    free(w);
    free(ref);
    free(mag);
    return bad ? -1 : 0;
}

static void run_sum(tally *t, const sum_case *c) {
    sum_job j;
    char desc[200];
    talon_status st = TALON_ERROR_DRIVER;
    if (sum_prepare(&j, c) == 0 && sum_poison(&j) == 0 &&
        (st = sum_launch(&j, g_ctx, g_stream)) == TALON_SUCCESS &&
        cu.cuStreamSynchronize(g_stream) == CUDA_SUCCESS) {
        sum_check(&j, t);
    } else {
        describe_sum(c, desc, sizeof desc);
        print_error("FAILED moe_sum %s: launch: %s %s\n", desc, talon_status_string(st),
                    talon_last_error());
        t->cases++;
        t->failures++;
    }
    sum_free(&j);
}

static void test_sum(void **state) {
    static const int64_t tokens[] = {1, 7, 111, 4096};
    static const int64_t ks[] = {1, 2, 3, 4, 8, 9}; /* 4, 2, 2, 2, 1, 1 slices per thread */
    static const int64_t hidden[] = {1, 7, 111, 500, 4096, 8200};
    tally t = {"moe_sum", 0, 0, 0, 0};
    int dt, a, b, c, wgt, off;
    (void)state;
    for (dt = 0; dt < 2; dt++)
        for (a = 0; a < COUNT(tokens); a++)
            for (b = 0; b < COUNT(ks); b++)
                for (c = 0; c < COUNT(hidden); c++)
                    for (wgt = 0; wgt < 2; wgt++)
                        for (off = 0; off < 2; off++) {
                            sum_case x;
                            /* the big token count only with short rows (host reference time) */
                            if (tokens[a] == 4096 && hidden[c] > 111) continue;
                            if (g_quick && (tokens[a] == 7 || tokens[a] > 111 || b % 2 || c % 2)) continue;
                            x.dtype = (talon_dtype)dt;
                            x.tokens = tokens[a];
                            x.k = ks[b];
                            x.hidden = hidden[c];
                            x.weighted = wgt;
                            x.offset = off;
                            x.seed = seed_of(dt, tokens[a], ks[b], hidden[c], wgt * 2 + off);
                            run_sum(&t, &x);
                        }
    {
        /* the benchmark shapes, and k = 64 */
        sum_case x = {TALON_DTYPE_BF16, g_quick ? 64 : 4096, 8, 4096, 1, 0, 5};
        sum_case y = {TALON_DTYPE_F16, 33, 64, 2056, 1, 0, 6};
        sum_case z = {TALON_DTYPE_F16, g_quick ? 64 : 4096, 2, 7168, 1, 0, 7};
        run_sum(&t, &x);
        run_sum(&t, &y);
        run_sum(&t, &z);
    }
    tally_end(&t);
}

/* ================================================================ graphs */
/* Both ops (the small and the cluster align kernel, both moe_sum paths) captured into one
   graph on a created stream; replayed twice, each time on fresh inputs and fresh poison. */
static void test_graph(void **state) {
    static const align_case ac[2] = {{16, 8, 256, 64, D_MIXED, 0, 11, 1},
                                     {4096, 8, 256, 64, D_MIXED, 0, 12, 0}};
    static const sum_case sc[2] = {{TALON_DTYPE_BF16, 64, 8, 4096, 1, 0, 13},
                                   {TALON_DTYPE_F16, 7, 3, 111, 0, 1, 14}};
    tally ta = {"graph: moe_align", 0, 0, 0, -1}, ts = {"graph: moe_sum", 0, 0, 0, 0};
    align_job aj[2];
    sum_job sj[2];
    CUgraph graph;
    CUgraphExec exec;
    int i, r, ok = 1;
    (void)state;
    for (i = 0; i < 2; i++) {
        assert_int_equal(align_prepare(&aj[i], &ac[i]), 0);
        assert_int_equal(sum_prepare(&sj[i], &sc[i]), 0);
    }
    CHECK_CU(cu.cuStreamBeginCapture(g_stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    for (i = 0; i < 2; i++) {
        ok &= align_launch(&aj[i], g_ctx, g_stream) == TALON_SUCCESS;
        ok &= sum_launch(&sj[i], g_ctx, g_stream) == TALON_SUCCESS;
    }
    CHECK_CU(cu.cuStreamEndCapture(g_stream, &graph));
    if (!ok) fail_msg("launch during capture failed: %s", talon_last_error());
    CHECK_CU(cu.cuGraphInstantiateWithFlags(&exec, graph, 0));
    for (r = 0; r < 2; r++) {
        for (i = 0; i < 2; i++) {
            if (r) { /* fresh inputs */
                align_case a2 = aj[i].c;
                sum_case s2 = sj[i].c;
                uint64_t s = s2.seed ^ 0x5555;
                int64_t e;
                a2.seed ^= 0x1234;
                make_ids(&a2, aj[i].h_ids);
                aj[i].c = a2;
                CHECK_CU(cu.cuMemcpyHtoD(aj[i].ids, aj[i].h_ids, (size_t)(a2.tokens * a2.k) * 4));
                for (e = 0; e < sj[i].nin; e++)
                    sj[i].h_in[e] = ref_from_f32(s2.dtype, 2.f * ref_unit01(&s) - 1.f);
                for (e = 0; e < s2.tokens * s2.k; e++) sj[i].h_w[e] = ref_unit01(&s);
                CHECK_CU(cu.cuMemcpyHtoD(sj[i].in + 2 * (CUdeviceptr)s2.offset, sj[i].h_in,
                                         (size_t)sj[i].nin * 2));
                CHECK_CU(cu.cuMemcpyHtoD(sj[i].w, sj[i].h_w, (size_t)(s2.tokens * s2.k) * 4));
            }
            assert_int_equal(align_poison(&aj[i]), 0);
            assert_int_equal(sum_poison(&sj[i]), 0);
        }
        CHECK_CU(cu.cuGraphLaunch(exec, g_stream));
        CHECK_CU(cu.cuStreamSynchronize(g_stream));
        for (i = 0; i < 2; i++) {
            align_check(&aj[i], &ta);
            sum_check(&sj[i], &ts);
        }
    }
    cu.cuGraphExecDestroy(exec);
    cu.cuGraphDestroy(graph);
    for (i = 0; i < 2; i++) {
        align_free(&aj[i]);
        sum_free(&sj[i]);
    }
    tally_end(&ta);
    tally_end(&ts);
}

/* ================================================================ main */
int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_align_grid),
        cmocka_unit_test(test_align_adversarial),
        cmocka_unit_test(test_sum),
        cmocka_unit_test(test_graph),
    };
    gpu_test t;
    int failed;
    if (gpu_test_begin(&t, "test_gpu_moe", CU_STREAM_DEFAULT)) return 1;
    g_ctx = t.ctx;
    g_stream = t.stream;
    g_quick = t.quick;
    failed = cmocka_run_group_tests_name("talon GPU moe", tests, NULL, NULL);
    return gpu_test_end(&t, "", (long long)g_cases, (long long)g_elements, failed);
}
