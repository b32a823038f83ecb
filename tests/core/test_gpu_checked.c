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

/* ================================================================ kv_append */
static int kv_case(const char *name, int64_t hk, int64_t d, talon_dtype cache_dtype,
                   int64_t bad_t, int64_t bad_slot) {
    enum { T = 37, PS = 16, PAGES = 8 };
    const int64_t row = hk * d, slots = PS * PAGES, cbytes = cache_dtype == TALON_DTYPE_FP8_E4M3 ? 1 : 2;
    int64_t *slot = (int64_t *)malloc(T * 8);
    uint16_t *k = random_16(TALON_DTYPE_BF16, (size_t)(T * row), 11, 2.0f);
    uint16_t *v = random_16(TALON_DTYPE_BF16, (size_t)(T * row), 12, 2.0f);
    region rg[2];
    CUdeviceptr dk = gpu_alloc((size_t)(T * row * 2)), dv = gpu_alloc((size_t)(T * row * 2));
    CUdeviceptr ds_ok = gpu_alloc(T * 8), ds_bad = gpu_alloc(T * 8);
    talon_kv_append_args a, b;
    want_report w = {NULL, NULL, 0, 0, 0, NULL};
    int64_t t;
    int fails;
    for (t = 0; t < T; t++) slot[t] = (int64_t)((t * 37 + 5) % slots); /* distinct */
    slot[5] = -1; /* padding: skipped, never a violation */
    upload(dk, k, (size_t)(T * row * 2));
    upload(dv, v, (size_t)(T * row * 2));
    upload(ds_ok, slot, T * 8);
    if (bad_t >= 0) slot[bad_t] = bad_slot;
    upload(ds_bad, slot, T * 8);
    rg[0] = region_new((size_t)(slots * row * cbytes), GUARD, NULL);
    rg[1] = region_new((size_t)(slots * row * cbytes), GUARD, NULL);
    memset(&a, 0, sizeof a);
    a.k_cache = rg[0].p; a.v_cache = rg[1].p; a.k = dk; a.v = dv; a.slot_mapping = ds_bad;
    a.tokens = T; a.num_kv_heads = hk; a.head_dim = d; a.num_pages = PAGES; a.page_size = PS;
    a.cache_dtype = cache_dtype;
    if (cache_dtype == TALON_DTYPE_FP8_E4M3) a.k_scale = a.v_scale = 0.5f;
    b = a; /* skipping a bad slot is documented without checking: the same inputs */
    if (bad_t >= 0) {
        w.op = "talon_kv_append"; w.what = "slot_mapping";
        w.index = bad_t; w.value = bad_slot; w.bound = slots;
    }
    fails = run_pair(name, rg, 2, OP_kv_append, &b, &a, &w, NULL, NULL);
    region_free(&rg[0]); region_free(&rg[1]);
    cu.cuMemFree(dk); cu.cuMemFree(dv); cu.cuMemFree(ds_ok); cu.cuMemFree(ds_bad);
    free(slot); free(k); free(v);
    return fails;
}

static void test_kv_append(void **state) {
    int fails = 0;
    (void)state;
    fails += kv_case("kv_append valid (a -1 padding slot)", 4, 128, TALON_DTYPE_BF16, -1, 0);
    fails += kv_case("kv_append slot = num_slots (v8)", 4, 128, TALON_DTYPE_BF16, 13, 128);
    fails += kv_case("kv_append slot 2^40 (element-wise)", 1, 100, TALON_DTYPE_BF16, 36, 1LL << 40);
    fails += kv_case("kv_append slot INT64_MAX (fp8 cache)", 4, 128, TALON_DTYPE_FP8_E4M3, 0, INT64_MAX);
    if (fails) fail_msg("%d kv_append failures", fails);
}

/* ================================================================ rope */
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

/* ================================================================ gather_rows */
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

/* ================================================================ decode_attention */
typedef struct decode_setup {
    int64_t batch, hq, hk, d, ps, max_len, pages, pt_stride;
    int fp8;
    int32_t *lens, *table;
    CUdeviceptr k, v, dlens, dtable, ws, dlens_bad, dtable_bad;
    int64_t ws_bytes;
    region rg[2]; /* o, lse */
} decode_setup;

static void decode_args(const decode_setup *ds, talon_decode_attention_args *a, int64_t splits,
                        int declare) {
    memset(a, 0, sizeof *a);
    a->o = ds->rg[0].p; a->lse = ds->rg[1].p; /* q and the workspace: the caller's */
    a->k_cache = ds->k; a->v_cache = ds->v; a->page_table = ds->dtable; a->kv_lens = ds->dlens;
    a->batch = ds->batch; a->num_qo_heads = ds->hq; a->num_kv_heads = ds->hk;
    a->head_dim = ds->d; a->page_size = ds->ps; a->page_table_stride = ds->pt_stride;
    a->max_kv_len = ds->max_len; a->num_splits = splits;
    a->kv_dtype = ds->fp8 ? TALON_DTYPE_FP8_E4M3 : TALON_DTYPE_BF16;
    a->k_scale = a->v_scale = 0.5f;
    a->num_pages = declare ? ds->pages : 0;
}

/* Caches of `pages` pages (exact allocations: a read past them is memcheck's), a page table
   of distinct random pages, the lengths. */
static void decode_setup_make(decode_setup *ds, int64_t batch, int64_t hq, int64_t hk, int64_t d,
                              int64_t ps, int64_t max_len, int fp8, const int32_t *lens) {
    const int64_t per = (max_len + ps - 1) / ps;
    const size_t cache = (size_t)(batch * per + 3) * (size_t)(ps * hk * d) * (fp8 ? 1 : 2);
    uint64_t s = ref_mix64(41);
    int64_t i, n;
    int32_t *perm;
    memset(ds, 0, sizeof *ds);
    ds->batch = batch; ds->hq = hq; ds->hk = hk; ds->d = d; ds->ps = ps; ds->max_len = max_len;
    ds->fp8 = fp8; ds->pt_stride = per; ds->pages = batch * per + 3;
    n = ds->pages;
    perm = (int32_t *)malloc((size_t)n * 4);
    for (i = 0; i < n; i++) perm[i] = (int32_t)i;
    for (i = n - 1; i > 0; i--) {
        const int64_t j = (int64_t)(ref_next64(&s) % (uint64_t)(i + 1));
        const int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    ds->table = (int32_t *)malloc((size_t)(batch * per) * 4);
    memcpy(ds->table, perm, (size_t)(batch * per) * 4);
    free(perm);
    ds->lens = (int32_t *)malloc((size_t)batch * 4);
    memcpy(ds->lens, lens, (size_t)batch * 4);
    ds->k = gpu_alloc(cache);
    ds->v = gpu_alloc(cache);
    if (fp8) {
        unsigned char *h = (unsigned char *)malloc(cache);
        size_t b;
        for (b = 0; b < cache; b++) h[b] = ref_e4m3_from_f32(4.0f * (2.0f * ref_unit01(&s) - 1.0f));
        upload(ds->k, h, cache);
        for (b = 0; b < cache; b++) h[b] = ref_e4m3_from_f32(4.0f * (2.0f * ref_unit01(&s) - 1.0f));
        upload(ds->v, h, cache);
        free(h);
    } else {
        uint16_t *h = random_16(TALON_DTYPE_BF16, cache / 2, 42, 1.0f);
        upload(ds->k, h, cache);
        free(h);
        h = random_16(TALON_DTYPE_BF16, cache / 2, 43, 1.0f);
        upload(ds->v, h, cache);
        free(h);
    }
    ds->dlens = gpu_alloc((size_t)batch * 4);
    ds->dlens_bad = gpu_alloc((size_t)batch * 4);
    ds->dtable = gpu_alloc((size_t)(batch * per) * 4);
    ds->dtable_bad = gpu_alloc((size_t)(batch * per) * 4);
    upload(ds->dlens, ds->lens, (size_t)batch * 4);
    upload(ds->dtable, ds->table, (size_t)(batch * per) * 4);
    ds->rg[0] = region_new((size_t)(batch * hq * d * 2), GUARD, NULL);
    ds->rg[1] = region_new((size_t)(batch * hq * 4), GUARD, NULL);
    ds->ws_bytes = 1 << 24;
    ds->ws = gpu_alloc((size_t)ds->ws_bytes);
}

static void decode_setup_free(decode_setup *ds) {
    region_free(&ds->rg[0]); region_free(&ds->rg[1]);
    cu.cuMemFree(ds->k); cu.cuMemFree(ds->v); cu.cuMemFree(ds->dlens); cu.cuMemFree(ds->dlens_bad);
    cu.cuMemFree(ds->dtable); cu.cuMemFree(ds->dtable_bad); cu.cuMemFree(ds->ws);
    free(ds->lens); free(ds->table);
    memset(ds, 0, sizeof *ds);
}

/* The checked run may differ in request `b`'s rows only, and those must be NaN. */
typedef struct nan_rows { int64_t b, hq, d; } nan_rows;
static int decode_nan_allowed(const void *ctx, int i, size_t off, const unsigned char *got) {
    const nan_rows *n = (const nan_rows *)ctx;
    if (n->b < 0) return 0;
    if (i == 0) { /* o: bf16 [batch, hq, d] */
        const size_t row = off / (size_t)(n->hq * n->d * 2);
        uint16_t x;
        if ((int64_t)row != n->b) return 0;
        memcpy(&x, got + (off & ~(size_t)1), 2);
        return (x & 0x7f80) == 0x7f80 && (x & 0x7f) != 0;
    } else { /* lse: fp32 [batch, hq] */
        const size_t row = off / (size_t)(n->hq * 4);
        float x;
        if ((int64_t)row != n->b) return 0;
        memcpy(&x, got + (off & ~(size_t)3), 4);
        return isnan(x);
    }
}

/* One decode case: the checked run with kv_lens[lens_b] = lens_v (lens_b >= 0) or page-table
   entry pt_at = pt_v (pt_at >= 0); reading == whether the kernel reads that entry. */
static int decode_case(const char *name, decode_setup *ds, int64_t splits, int declare,
                       int64_t lens_b, int32_t lens_v, int64_t pt_at, int32_t pt_v, int reading) {
    talon_decode_attention_args ref, chk;
    want_report w = {NULL, NULL, 0, 0, 0, NULL};
    nan_rows nr = {-1, ds->hq, ds->d};
    uint16_t *q = random_16(TALON_DTYPE_BF16, (size_t)(ds->batch * ds->hq * ds->d), 44, 1.0f);
    CUdeviceptr dq = gpu_alloc((size_t)(ds->batch * ds->hq * ds->d * 2));
    int32_t *lens = (int32_t *)malloc((size_t)ds->batch * 4);
    int32_t *table = (int32_t *)malloc((size_t)(ds->batch * ds->pt_stride) * 4);
    int fails;
    upload(dq, q, (size_t)(ds->batch * ds->hq * ds->d * 2));
    memcpy(lens, ds->lens, (size_t)ds->batch * 4);
    memcpy(table, ds->table, (size_t)(ds->batch * ds->pt_stride) * 4);
    if (lens_b >= 0) lens[lens_b] = lens_v;
    if (pt_at >= 0) table[pt_at] = pt_v;
    upload(ds->dlens_bad, lens, (size_t)ds->batch * 4);
    upload(ds->dtable_bad, table, (size_t)(ds->batch * ds->pt_stride) * 4);
    decode_args(ds, &ref, splits, declare);
    ref.q = dq; ref.workspace = ds->ws; ref.workspace_bytes = ds->ws_bytes;
    chk = ref;
    chk.kv_lens = ds->dlens_bad;
    chk.page_table = ds->dtable_bad;
    if (lens_b >= 0) { /* clamping is documented without checking: the same inputs */
        ref.kv_lens = ds->dlens_bad;
        w.op = "talon_decode_attention"; w.what = "kv_lens";
        w.index = lens_b; w.value = lens_v; w.bound = ds->max_len;
    }
    if (pt_at >= 0 && reading) { /* unchecked, the bad page would be read: the valid table */
        w.op = "talon_decode_attention"; w.what = "page_table";
        w.index = pt_at; w.value = pt_v; w.bound = declare ? ds->pages : 2147483648LL;
        nr.b = pt_at / ds->pt_stride;
    }
    if (pt_at >= 0 && !reading) ref.page_table = ds->dtable_bad; /* never read: same inputs */
    fails = run_pair(name, ds->rg, 2, OP_decode_attention, &ref, &chk, &w, decode_nan_allowed, &nr);
    if (nr.b >= 0) { /* the request's rows must be NaN (not merely allowed to be) */
        unsigned char *o = region_read(&ds->rg[0]);
        int64_t e;
        for (e = 0; e < ds->hq * ds->d; e++) {
            uint16_t x;
            memcpy(&x, o + ds->rg[0].guard + (size_t)((nr.b * ds->hq * ds->d + e) * 2), 2);
            if (!((x & 0x7f80) == 0x7f80 && (x & 0x7f))) {
                print_error("%s: o[%lld, %lld] = 0x%04x, not NaN\n", name, (long long)nr.b,
                            (long long)e, x);
                fails++;
                break;
            }
        }
        free(o);
    }
    cu.cuMemFree(dq);
    free(q); free(lens); free(table);
    return fails;
}

static void test_decode_attention(void **state) {
    static const int32_t lens[4] = {256, 100, 37, 200};
    /* (hq, hk, fp8): the per-lane kernel (one head per CTA), the tensor-core one (4), fp8 */
    static const int64_t shapes[3][3] = {{8, 8, 0}, {32, 8, 0}, {16, 8, 1}};
    decode_setup ds;
    int fails = 0, i;
    char name[160];
    (void)state;
    for (i = 0; i < 3; i++) {
        const char *kind = i == 0 ? "per-lane" : i == 1 ? "tensor-core" : "fp8";
        int64_t splits;
        decode_setup_make(&ds, 4, shapes[i][0], shapes[i][1], 128, 16, 256, (int)shapes[i][2], lens);
        for (splits = 1; splits <= 3; splits += 2) {
            const int64_t st = ds.pt_stride;
            snprintf(name, sizeof name, "decode %s, %lld split(s), valid", kind, (long long)splits);
            fails += decode_case(name, &ds, splits, 1, -1, 0, -1, 0, 0);
            snprintf(name, sizeof name, "decode %s, %lld split(s), kv_lens 300 > max", kind, (long long)splits);
            fails += decode_case(name, &ds, splits, 1, 2, 300, -1, 0, 0);
            snprintf(name, sizeof name, "decode %s, %lld split(s), kv_lens -4", kind, (long long)splits);
            fails += decode_case(name, &ds, splits, 1, 1, -4, -1, 0, 0);
            snprintf(name, sizeof name, "decode %s, %lld split(s), page = num_pages", kind, (long long)splits);
            fails += decode_case(name, &ds, splits, 1, -1, 0, 1 * st + 3, (int32_t)ds.pages, 1);
            snprintf(name, sizeof name, "decode %s, %lld split(s), page 2^30", kind, (long long)splits);
            fails += decode_case(name, &ds, splits, 1, -1, 0, 3 * st + 12, 1 << 30, 1);
            snprintf(name, sizeof name, "decode %s, %lld split(s), page -1, num_pages undeclared", kind, (long long)splits);
            fails += decode_case(name, &ds, splits, 0, -1, 0, 0 * st + 15, -1, 1);
            snprintf(name, sizeof name, "decode %s, %lld split(s), bad entry past kv_lens (unread)", kind, (long long)splits);
            fails += decode_case(name, &ds, splits, 1, -1, 0, 2 * st + 10, -1, 0);
        }
        decode_setup_free(&ds);
    }
    if (fails) fail_msg("%d decode failures", fails);
}

/* ================================================================ prefill_attention_paged */
static int paged_case(const char *name, int64_t ps, int64_t lens_b, int32_t lens_v, int64_t pt_b,
                      int64_t pt_i, int32_t pt_v, int reading) {
    enum { B = 3, HQ = 8, HK = 2, D = 128, MAXLEN = 320 };
    static const int32_t qlen[B] = {20, 64, 5}, klen[B] = {100, 64, 300};
    const int64_t per = MAXLEN / ps, pages = B * per + 5;
    int32_t cu_q[B + 1], lens[B], *table = (int32_t *)malloc((size_t)(B * per) * 4);
    int64_t total_q, i;
    uint16_t *q, *kc, *vc;
    region rg[2];
    CUdeviceptr dq, dk, dv, dcu, dlens, dtable, ws;
    talon_prefill_attention_paged_args a;
    want_report w = {NULL, NULL, 0, 0, 0, NULL};
    int fails;
    cu_q[0] = 0;
    for (i = 0; i < B; i++) cu_q[i + 1] = cu_q[i] + qlen[i];
    total_q = cu_q[B];
    for (i = 0; i < B; i++) lens[i] = klen[i];
    for (i = 0; i < B * per; i++) table[i] = (int32_t)((i * 7 + 3) % pages); /* distinct */
    if (lens_b >= 0) lens[lens_b] = lens_v;
    if (pt_b >= 0) table[pt_b * per + pt_i] = pt_v;
    q = random_16(TALON_DTYPE_BF16, (size_t)(total_q * HQ * D), 51, 1.0f);
    kc = random_16(TALON_DTYPE_BF16, (size_t)(pages * ps * HK * D), 52, 1.0f);
    vc = random_16(TALON_DTYPE_BF16, (size_t)(pages * ps * HK * D), 53, 1.0f);
    dq = gpu_alloc((size_t)(total_q * HQ * D * 2));
    dk = gpu_alloc((size_t)(pages * ps * HK * D * 2));
    dv = gpu_alloc((size_t)(pages * ps * HK * D * 2));
    dcu = gpu_alloc(sizeof cu_q); dlens = gpu_alloc(sizeof lens);
    dtable = gpu_alloc((size_t)(B * per) * 4); ws = gpu_alloc(16);
    upload(dq, q, (size_t)(total_q * HQ * D * 2));
    upload(dk, kc, (size_t)(pages * ps * HK * D * 2));
    upload(dv, vc, (size_t)(pages * ps * HK * D * 2));
    upload(dcu, cu_q, sizeof cu_q); upload(dlens, lens, sizeof lens);
    upload(dtable, table, (size_t)(B * per) * 4);
    rg[0] = region_new((size_t)(total_q * HQ * D * 2), GUARD, NULL);
    rg[1] = region_new((size_t)(total_q * HQ * 4), GUARD, NULL);
    memset(&a, 0, sizeof a);
    a.o = rg[0].p; a.lse = rg[1].p; a.q = dq; a.k_cache = dk; a.v_cache = dv;
    a.page_table = dtable; a.kv_lens = dlens; a.cu_seqlens_q = dcu; a.workspace = ws;
    a.workspace_bytes = 16; a.batch = B; a.total_q = total_q; a.max_seqlen_q = 64;
    a.max_kv_len = MAXLEN; a.num_pages = pages; a.page_size = ps; a.num_qo_heads = HQ;
    a.num_kv_heads = HK; a.head_dim = D; a.causal = 1;
    w.kernel = ps < 16 ? "talon_prefill_attention_gather_" : "talon_prefill_attention_pages_";
    if (lens_b >= 0) {
        w.op = "talon_prefill_attention_paged"; w.what = "kv_lens";
        w.index = lens_b; w.value = lens_v; w.bound = MAXLEN;
    }
    if (pt_b >= 0 && reading) {
        w.op = "talon_prefill_attention_paged"; w.what = "page_table";
        w.index = pt_b * per + pt_i; w.value = pt_v; w.bound = pages;
    }
    /* without checking a bad page reads zeros and a bad kv_lens is clamped: the same inputs */
    fails = run_pair(name, rg, 2, OP_prefill_attention_paged, &a, &a, &w, NULL, NULL);
    region_free(&rg[0]); region_free(&rg[1]);
    cu.cuMemFree(dq); cu.cuMemFree(dk); cu.cuMemFree(dv); cu.cuMemFree(dcu);
    cu.cuMemFree(dlens); cu.cuMemFree(dtable); cu.cuMemFree(ws);
    free(table); free(q); free(kc); free(vc);
    return fails;
}

static void test_prefill_paged(void **state) {
    int fails = 0, i;
    char name[160];
    (void)state;
    for (i = 0; i < 2; i++) { /* pages of 16: a TMA box per page; of 8: rows gathered */
        const int64_t ps = i ? 8 : 16;
        const char *path = i ? "gather" : "TMA pages";
        snprintf(name, sizeof name, "prefill paged %s valid", path);
        fails += paged_case(name, ps, -1, 0, -1, 0, 0, 0);
        snprintf(name, sizeof name, "prefill paged %s kv_lens -1", path);
        fails += paged_case(name, ps, 0, -1, -1, 0, 0, 0);
        snprintf(name, sizeof name, "prefill paged %s kv_lens 321 > max", path);
        fails += paged_case(name, ps, 2, 321, -1, 0, 0, 0);
        snprintf(name, sizeof name, "prefill paged %s page = num_pages", path);
        fails += paged_case(name, ps, -1, 0, 2, 7, (int32_t)(3 * (320 / ps) + 5), 1);
        snprintf(name, sizeof name, "prefill paged %s page -9", path);
        fails += paged_case(name, ps, -1, 0, 1, 0, -9, 1);
        snprintf(name, sizeof name, "prefill paged %s bad entry past kv_lens (unread)", path);
        fails += paged_case(name, ps, -1, 0, 1, 320 / ps - 1, -9, 0);
    }
    if (fails) fail_msg("%d prefill paged failures", fails);
}

/* ================================================================ moe_gemm */
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

#endif /* CHECKED_BASELINE */

/* ================================================================ --bench */
typedef struct bench_case {
    const char *name;
    int op;     /* OP_* of op_calls.h */
    void *args; /* the op's args (valid inputs) */
} bench_case;

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

static CUdeviceptr bench_fill(size_t bytes, uint64_t seed) {
    CUdeviceptr p = gpu_alloc(bytes);
    uint16_t *h = random_16(TALON_DTYPE_BF16, bytes / 2, seed, 1.0f);
    upload(p, h, bytes / 2 * 2);
    free(h);
    return p;
}

/* Each family at a size of a serving step (Llama-3-8B-like heads: 32 q, 8 kv, d 128). */
static int bench_main(int reps) {
    enum { TOK = 4096, HQ = 32, HK = 8, D = 128, PS = 16 };
    talon_kv_append_args kv;
    talon_rope_args rope;
    talon_gather_rows_args ga;
    talon_decode_attention_args dec[3];
    talon_prefill_attention_paged_args pf[2];
    talon_moe_gemm_args mg[2];
    bench_case cases[16];
    int nc = 0, i;
    int64_t t;
    /* kv_append: 4096 tokens into a cache of 8192 slots */
    {
        int64_t *slot = (int64_t *)malloc(TOK * 8);
        CUdeviceptr ds = gpu_alloc(TOK * 8);
        for (t = 0; t < TOK; t++) slot[t] = (t * 5) % 8192;
        upload(ds, slot, TOK * 8);
        free(slot);
        memset(&kv, 0, sizeof kv);
        kv.k_cache = gpu_alloc((size_t)8192 * HK * D * 2); kv.v_cache = gpu_alloc((size_t)8192 * HK * D * 2);
        kv.k = bench_fill((size_t)TOK * HK * D * 2, 1); kv.v = bench_fill((size_t)TOK * HK * D * 2, 2);
        kv.slot_mapping = ds; kv.tokens = TOK; kv.num_kv_heads = HK; kv.head_dim = D;
        kv.num_pages = 8192 / PS; kv.page_size = PS;
        cases[nc].name = "kv_append 4096 tok, 8 x 128, bf16"; cases[nc].op = OP_kv_append; cases[nc++].args = &kv;
    }
    /* rope with a cos/sin cache */
    {
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
    }
    /* gather: 4096 embedding rows of 4096 */
    {
        int32_t *idx = (int32_t *)malloc(TOK * 4);
        CUdeviceptr di = gpu_alloc(TOK * 4);
        for (t = 0; t < TOK; t++) idx[t] = (int32_t)((t * 7919) % 32000);
        upload(di, idx, TOK * 4);
        free(idx);
        memset(&ga, 0, sizeof ga);
        ga.out = gpu_alloc((size_t)TOK * 4096 * 2); ga.in = bench_fill((size_t)32000 * 4096 * 2, 5);
        ga.indices = di; ga.rows = TOK; ga.cols = 4096; ga.in_rows = 32000;
        cases[nc].name = "gather_rows 4096 x 4096 bf16 of 32000"; cases[nc].op = OP_gather_rows; cases[nc++].args = &ga;
    }
    /* decode: 64 requests of 4096 keys; tensor-core bf16, fp8, and the per-lane kernel */
    for (i = 0; i < 3; i++) {
        static const char *const names[3] = {"decode B64 L4096 32/8 bf16 (tensor cores)",
                                             "decode B64 L4096 32/8 fp8 cache",
                                             "decode B64 L4096 32/32 bf16 (per-lane)"};
        const int64_t b = 64, l = 4096, per = l / PS, hk = i == 2 ? 32 : HK, fp8 = i == 1;
        const size_t cache = (size_t)(b * per) * PS * (size_t)hk * D * (fp8 ? 1 : 2);
        int32_t *pt = (int32_t *)malloc((size_t)(b * per) * 4), lens[64];
        int64_t ws = 0;
        CUdeviceptr dpt = gpu_alloc((size_t)(b * per) * 4), dl = gpu_alloc(sizeof lens);
        for (t = 0; t < b * per; t++) pt[t] = (int32_t)((t * 7) % (b * per));
        for (t = 0; t < b; t++) lens[t] = (int32_t)l;
        upload(dpt, pt, (size_t)(b * per) * 4);
        upload(dl, lens, sizeof lens);
        free(pt);
        memset(&dec[i], 0, sizeof dec[i]);
        dec[i].o = gpu_alloc((size_t)b * HQ * D * 2); dec[i].lse = gpu_alloc((size_t)b * HQ * 4);
        dec[i].q = bench_fill((size_t)b * HQ * D * 2, 6);
        dec[i].k_cache = gpu_alloc(cache); dec[i].v_cache = gpu_alloc(cache);
        GPU_CK(cu.cuMemsetD8(dec[i].k_cache, 0x22, cache));
        GPU_CK(cu.cuMemsetD8(dec[i].v_cache, 0x22, cache));
        dec[i].page_table = dpt; dec[i].kv_lens = dl; dec[i].batch = b; dec[i].num_qo_heads = HQ;
        dec[i].num_kv_heads = hk; dec[i].head_dim = D; dec[i].page_size = PS;
        dec[i].max_kv_len = l; dec[i].kv_dtype = fp8 ? TALON_DTYPE_FP8_E4M3 : TALON_DTYPE_BF16;
        dec[i].k_scale = dec[i].v_scale = 1.0f;
#ifndef CHECKED_BASELINE
        dec[i].num_pages = b * per;
#endif
        if (talon_decode_attention_workspace_size(g.ctx, &dec[i], &ws) != TALON_SUCCESS) return 1;
        dec[i].workspace = gpu_alloc((size_t)(ws ? ws : 16));
        dec[i].workspace_bytes = ws;
        cases[nc].name = names[i]; cases[nc].op = OP_decode_attention; cases[nc++].args = &dec[i];
    }
    /* prefill paged: 4 prompts of 2048 tokens, causal; pages of 16 (TMA) and of 8 (gather) */
    for (i = 0; i < 2; i++) {
        const int64_t b = 4, l = 2048, ps = i ? 8 : 16, per = l / ps;
        const size_t cache = (size_t)(b * per) * (size_t)ps * HK * D * 2;
        int32_t *pt = (int32_t *)malloc((size_t)(b * per) * 4), lens[4], cq[5];
        CUdeviceptr dpt = gpu_alloc((size_t)(b * per) * 4), dl = gpu_alloc(sizeof lens), dcq = gpu_alloc(sizeof cq);
        for (t = 0; t < b * per; t++) pt[t] = (int32_t)((t * 7) % (b * per));
        for (t = 0; t < b; t++) lens[t] = (int32_t)l;
        for (t = 0; t <= b; t++) cq[t] = (int32_t)(t * l);
        upload(dpt, pt, (size_t)(b * per) * 4);
        upload(dl, lens, sizeof lens);
        upload(dcq, cq, sizeof cq);
        free(pt);
        memset(&pf[i], 0, sizeof pf[i]);
        pf[i].o = gpu_alloc((size_t)b * l * HQ * D * 2); pf[i].lse = 0;
        pf[i].q = bench_fill((size_t)b * l * HQ * D * 2, 7);
        pf[i].k_cache = bench_fill(cache, 8); pf[i].v_cache = bench_fill(cache, 9);
        pf[i].page_table = dpt; pf[i].kv_lens = dl; pf[i].cu_seqlens_q = dcq;
        pf[i].workspace = gpu_alloc(16); pf[i].workspace_bytes = 16; pf[i].batch = b;
        pf[i].total_q = b * l; pf[i].max_seqlen_q = l; pf[i].max_kv_len = l;
        pf[i].num_pages = b * per; pf[i].page_size = ps; pf[i].num_qo_heads = HQ;
        pf[i].num_kv_heads = HK; pf[i].head_dim = D; pf[i].causal = 1;
        cases[nc].name = i ? "prefill paged 4 x 2048 causal, pages of 8" : "prefill paged 4 x 2048 causal, pages of 16";
        cases[nc].op = OP_prefill_attention_paged; cases[nc++].args = &pf[i];
    }
    /* moe_gemm: Mixtral-like, 2048 tokens, top-2 of 8: w13 gated (TOKEN -> SORTED), w2 with
       router weights (SORTED -> PAIR) */
    {
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
        if (talon_moe_align_block_size(g.ctx, g.stream, &al) != TALON_SUCCESS) return 1;
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
    }
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
            cmocka_unit_test(test_kv_append),     cmocka_unit_test(test_rope),
            cmocka_unit_test(test_gather_rows),   cmocka_unit_test(test_decode_attention),
            cmocka_unit_test(test_prefill_paged), cmocka_unit_test(test_moe_gemm),
            cmocka_unit_test(test_grouped_gemm),
            cmocka_unit_test(test_record),
        };
        failed = cmocka_run_group_tests_name("talon checked mode", tests, NULL, NULL);
#endif
    }
    talon_ctx_destroy(g_chk);
    return gpu_test_end(&g, "", g_cases, g_elements, failed);
}
