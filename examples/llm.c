/* llm.c - a decoder-only transformer on talon: see llm.h. Every op of the forward pass is a
   talon call; the driver API only allocates, copies and replays graphs.

   Per layer, on T rows (prompt tokens, or one token per sequence when decoding):
     h = rmsnorm(x)                                talon_rmsnorm (or talon_fused_add_rmsnorm
                                                   when x still owes an MoE output)
     q, k, v = h Wq^T, h Wk^T, h Wv^T              talon_gemm (three: each result contiguous,
                                                   as decode attention and rope want them)
     Qwen3: q, k = rmsnorm of each head            talon_rmsnorm, rows of head_dim
     rope(q, k) at the tokens' positions           talon_rope (NeoX, theta or a llama3 cache)
     k, v -> paged cache                           talon_kv_append
     a = attention(q, cache)                       prefill: talon_prefill_attention on the
                                                   new k, v (ragged, causal); decode:
                                                   talon_decode_attention on the cache
     x = a Wo^T + x                                talon_gemm with the residual as c = d
     h = rmsnorm(x)
     dense MLP:
       g = silu(h Wgate^T) * (h Wup^T)             talon_gemm, gated (one [2I, H] weight)
       x = g Wdown^T + x                           talon_gemm with the residual
     MoE MLP (Qwen3-MoE):
       router logits, top-k, renormalised         talon_gemm, talon_moe_router_topk
       expert blocks                              talon_moe_align_block_size
       g = SwiGLU of each token's experts         talon_moe_gemm (token rows in, sorted out)
       y = g Wdown_e^T * router weight            talon_moe_gemm (sorted in, pair rows out)
       x += sum of the token's k rows             talon_moe_sum, added by the next norm
   Then the last row of each sequence (talon_gather_rows), the final norm, the LM head in fp32
   (talon_gemm, out_dtype F32) and the greedy token (talon_topk, k = 1). The embedding lookup
   is talon_gather_rows too. */
#define _POSIX_C_SOURCE 200809L
#include "llm.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "safetensors.h"
#include "sample.h"

#define MAX_ALLOCS 4096
#define MAX_MARKS 2048
#define PAGE_SIZE 16
#define PI 3.14159265358979323846

/* A linear layer's weight [n, k]: bf16, or (fp8 mode) e4m3 with one fp32 scale per 128 x 128
   block, [ceil(n / 128), ceil(k / 128)] row-major (talon_gemm's TALON_GEMM_SCALE_BLOCK). */
typedef struct weight {
    CUdeviceptr w, scale;           /* scale 0: bf16 */
} weight;

typedef struct layer_weights {
    CUdeviceptr attn_norm, mlp_norm;
    weight wq, wk, wv, wo;
    CUdeviceptr q_norm, k_norm;     /* Qwen3: RMSNorm of each head of q and k, before rope */
    int moe;                        /* MoE MLP (router + experts) instead of a dense one */
    weight w13, w2;                 /* dense MLP: [2I, H] (gate rows, then up), [H, I] */
    CUdeviceptr router;             /* MoE: [E, H] */
    CUdeviceptr e13, e2;            /* MoE experts: [E, 2I, H], [E, H, I] */
} layer_weights;

struct llm {
    model_config c;
    llm_options o;
    talon_ctx *ctx;
    CUstream stream;
    int64_t layers, H, Hq, Hk, D, I, V;
    int64_t E, moe_k, moe_I;        /* MoE: experts, experts per token, expert width */
    int64_t top_k;                  /* sampling candidates: 1 = greedy */
    int64_t sorted_cap, blocks_cap; /* moe_align's capacities for `rows` tokens */
    CUdeviceptr embed, final_norm, lm_head, rope_cache;
    layer_weights *w;
    CUdeviceptr *k_cache, *v_cache;
    int64_t pages_per_seq, num_pages;
    int64_t rows;               /* rows of the activation buffers: max(max_prefill, max_batch) */
    CUdeviceptr x, h, q, k, v, attn, mlp, last, logits, all_logits;
    /* MoE: router logits, top-k weights and ids, moe_align's outputs, the expert
       intermediate (sorted rows), the expert outputs (pair rows) and their sum */
    CUdeviceptr router_logits, topk_weights, topk_ids, sorted_ids, expert_ids, num_post,
        moe_inter, moe_pairs, moe_out;
    /* fp8 mode: the projections' input quantised per row and 128 columns (dense_input) */
    CUdeviceptr act8, act8_scale;
    CUdeviceptr ids, positions, slots, cu_seqlens, last_rows, page_table, kv_lens, next_ids,
        top_values, topk_ws, decode_ws, prefill_ws;
    /* top-k sampling: talon_topk's k candidates per sequence ([max_batch, top_k]), the host
       draws from them (sample.h) and writes next_ids */
    CUdeviceptr cand_ids;
    float *cand_values_host;
    int32_t *cand_ids_host;
    uint64_t rng;
    int64_t topk_ws_bytes, decode_ws_bytes, prefill_ws_bytes;
    /* the sequences of the last prefill */
    int64_t batch;
    int64_t *seq_len;           /* host: tokens in the cache */
    int32_t *page_table_host;
    CUgraphExec step_graph;
    int64_t graph_batch;        /* the batch step_graph was captured for */
    /* llm_profile_decode: an event before each stage of the step, captured into its graph */
    int profiling, marks;
    CUevent mark_events[MAX_MARKS];
    const char *mark_names[MAX_MARKS];
    CUdeviceptr allocs[MAX_ALLOCS];
    int num_allocs;
};

static void set_err(char *err, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
}

static int cu_fail(CUresult r, const char *call, char *err, size_t n) {
    const char *s = NULL;
    cuGetErrorString(r, &s);
    set_err(err, n, "%s: %s", call, s ? s : "unknown CUDA error");
    return -1;
}

#define CU(call)                                                                               \
    do {                                                                                       \
        CUresult r_ = (call);                                                                  \
        if (r_ != CUDA_SUCCESS) return cu_fail(r_, #call, err, err_len);                       \
    } while (0)
/* CU for functions that release what they hold at their `done:` label */
#define CUG(call)                                                                              \
    do {                                                                                       \
        CUresult r_ = (call);                                                                  \
        if (r_ != CUDA_SUCCESS) {                                                              \
            cu_fail(r_, #call, err, err_len);                                                  \
            goto done;                                                                         \
        }                                                                                      \
    } while (0)
#define TL(call)                                                                               \
    do {                                                                                       \
        if ((call) != TALON_SUCCESS) {                                                         \
            set_err(err, err_len, "%s", talon_last_error());                                   \
            return -1;                                                                         \
        }                                                                                      \
    } while (0)

/* Profiling: the stage that starts here (an event recorded on the stream; EXTERNAL, so that
   capture turns it into an event node of the profiled graph); nothing when not profiling. */
#define MARK(name)                                                                             \
    do {                                                                                       \
        if (m->profiling && m->marks < MAX_MARKS) {                                            \
            m->mark_names[m->marks] = (name);                                                  \
            CU(cuEventRecordWithFlags(m->mark_events[m->marks++], m->stream,                   \
                                      CU_EVENT_RECORD_EXTERNAL));                              \
        }                                                                                      \
    } while (0)

static int dev_alloc(llm *m, CUdeviceptr *p, int64_t bytes, char *err, size_t err_len) {
    if (m->num_allocs == MAX_ALLOCS) {
        set_err(err, err_len, "llm: more than %d device buffers", MAX_ALLOCS);
        return -1;
    }
    CU(cuMemAlloc(p, (size_t)(bytes > 0 ? bytes : 16)));
    m->allocs[m->num_allocs++] = *p;
    return 0;
}

/* ---------------------------------------------------------------- weights */
/* Copies tensor `name` (bf16, the given shape) to dst + offset bytes. */
static int upload(llm *m, const st_model *st, const char *name, int ndim, int64_t d0, int64_t d1,
                  CUdeviceptr dst, int64_t offset, char *err, size_t err_len) {
    const int64_t shape[2] = {d0, d1};
    const void *src = st_expect(st, name, ST_BF16, ndim, shape, err, err_len);
    (void)m;
    if (!src) return -1;
    CU(cuMemcpyHtoD(dst + (CUdeviceptr)offset, src, (size_t)(d0 * (ndim > 1 ? d1 : 1) * 2)));
    return 0;
}

/* e4m3 (the fn variant: no infinities, largest 448) of x, rounded to nearest even and
   saturated to +-448, as the GPU's cvt.rn.satfinite. */
static uint8_t e4m3_from_float(float x) {
    const uint8_t sign = x < 0 ? 0x80 : 0;
    double a = fabs((double)x), q;
    int e;
    if (x != x) return 0x7f;
    if (a >= 448.0) return sign | 0x7e;
    if (a < 0.015625) /* subnormal: steps of 2^-9 (8 of them reach the smallest normal) */
        return sign | (uint8_t)nearbyint(a * 512.0);
    a = frexp(a, &e); /* a in [0.5, 1): value = a 2^e, mantissa 2a - 1 in steps of 1/8 */
    q = nearbyint((2.0 * a - 1.0) * 8.0);
    if (q == 8.0) {
        q = 0.0;
        e++;
    }
    if (e + 6 > 15 || (e + 6 == 15 && q == 7.0)) return sign | 0x7e;
    return sign | (uint8_t)(((e + 6) << 3) | (int)q);
}

static float bf16_to_float(uint16_t b) {
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Uploads linear weight `name` ([n, k] bf16) into rows [row0, row0 + n) of w: as is, or in fp8
   mode quantised per 128 x 128 block (scale = amax / 448; row0 a multiple of 128). */
static int upload_linear(llm *m, const st_model *st, const char *name, int64_t n, int64_t k,
                         const weight *w, int64_t row0, char *err, size_t err_len) {
    const int64_t shape[2] = {n, k}, kb = (k + 127) / 128;
    const uint16_t *src;
    uint8_t *q;
    float *scales;
    int64_t bi, bj, i, j;
    CUresult r;
    if (!w->scale) return upload(m, st, name, 2, n, k, w->w, row0 * k * 2, err, err_len);
    src = (const uint16_t *)st_expect(st, name, ST_BF16, 2, shape, err, err_len);
    if (!src) return -1;
    q = (uint8_t *)malloc((size_t)(n * k));
    scales = (float *)malloc((size_t)(((n + 127) / 128) * kb) * sizeof(float));
    if (!q || !scales) {
        free(q); free(scales);
        set_err(err, err_len, "llm: out of host memory quantising %s", name);
        return -1;
    }
    for (bi = 0; bi < (n + 127) / 128; bi++)
        for (bj = 0; bj < kb; bj++) {
            float amax = 0, s;
            for (i = bi * 128; i < n && i < bi * 128 + 128; i++)
                for (j = bj * 128; j < k && j < bj * 128 + 128; j++) {
                    const float v = fabsf(bf16_to_float(src[i * k + j]));
                    if (v > amax) amax = v;
                }
            s = amax > 0 ? amax / 448.0f : 1.0f;
            scales[bi * kb + bj] = s;
            for (i = bi * 128; i < n && i < bi * 128 + 128; i++)
                for (j = bj * 128; j < k && j < bj * 128 + 128; j++)
                    q[i * k + j] = e4m3_from_float(bf16_to_float(src[i * k + j]) / s);
        }
    r = cuMemcpyHtoD(w->w + (CUdeviceptr)(row0 * k), q, (size_t)(n * k));
    if (r == CUDA_SUCCESS)
        r = cuMemcpyHtoD(w->scale + (CUdeviceptr)(row0 / 128 * kb * 4), scales,
                         (size_t)(((n + 127) / 128) * kb) * sizeof(float));
    free(q);
    free(scales);
    if (r != CUDA_SUCCESS) return cu_fail(r, "cuMemcpyHtoD(fp8 weight)", err, err_len);
    return 0;
}

/* Allocates a linear weight [n, k] (bf16, or fp8 with its block scales). */
static int new_weight(llm *m, weight *w, int64_t n, int64_t k, char *err, size_t err_len) {
    if (!m->o.fp8) return dev_alloc(m, &w->w, n * k * 2, err, err_len);
    if (dev_alloc(m, &w->w, n * k, err, err_len)) return -1;
    return dev_alloc(m, &w->scale, ((n + 127) / 128) * ((k + 127) / 128) * 4, err, err_len);
}

static int load_weights(llm *m, const st_model *st, char *err, size_t err_len) {
    char name[160];
    int64_t l;
    const int64_t H = m->H, qn = m->Hq * m->D, kvn = m->Hk * m->D, I = m->I;
#define NEW(p, elems) if (dev_alloc(m, &(p), (int64_t)(elems) * 2, err, err_len)) return -1
#define UP(n, nd, a, b, dst, off) if (upload(m, st, n, nd, a, b, dst, off, err, err_len)) return -1
    NEW(m->embed, m->V * H);
    UP("model.embed_tokens.weight", 2, m->V, H, m->embed, 0);
    NEW(m->final_norm, H);
    UP("model.norm.weight", 1, H, 0, m->final_norm, 0);
    if (m->c.tie_word_embeddings) {
        m->lm_head = m->embed;
    } else {
        NEW(m->lm_head, m->V * H);
        UP("lm_head.weight", 2, m->V, H, m->lm_head, 0);
    }
    for (l = 0; l < m->layers; l++) {
        layer_weights *w = &m->w[l];
#define LAYER(suffix)                                                                          \
    (snprintf(name, sizeof name, "model.layers.%lld.%s", (long long)l, suffix), name)
        NEW(w->attn_norm, H);
        UP(LAYER("input_layernorm.weight"), 1, H, 0, w->attn_norm, 0);
#define LINEAR(wt, rows, n, k, suffix, row0)                                                   \
    if ((row0) == 0 && new_weight(m, &(wt), rows, k, err, err_len)) return -1;                 \
    if (upload_linear(m, st, LAYER(suffix), n, k, &(wt), row0, err, err_len)) return -1
        LINEAR(w->wq, qn, qn, H, "self_attn.q_proj.weight", 0);
        LINEAR(w->wk, kvn, kvn, H, "self_attn.k_proj.weight", 0);
        LINEAR(w->wv, kvn, kvn, H, "self_attn.v_proj.weight", 0);
        LINEAR(w->wo, H, H, qn, "self_attn.o_proj.weight", 0);
        NEW(w->mlp_norm, H);
        UP(LAYER("post_attention_layernorm.weight"), 1, H, 0, w->mlp_norm, 0);
        if (m->c.arch == MODEL_QWEN3_MOE) {
            NEW(w->q_norm, m->D);
            UP(LAYER("self_attn.q_norm.weight"), 1, m->D, 0, w->q_norm, 0);
            NEW(w->k_norm, m->D);
            UP(LAYER("self_attn.k_norm.weight"), 1, m->D, 0, w->k_norm, 0);
        }
        w->moe = m->c.arch == MODEL_QWEN3_MOE && model_config_layer_is_moe(&m->c, l);
        if (w->moe) {
            const int64_t E = m->E, J = m->moe_I;
            int64_t e;
            char expert[96];
            NEW(w->router, E * H);
            UP(LAYER("mlp.gate.weight"), 2, E, H, w->router, 0);
            NEW(w->e13, E * 2 * J * H);
            NEW(w->e2, E * H * J);
            for (e = 0; e < E; e++) {
#define EXPERT(proj)                                                                           \
    (snprintf(expert, sizeof expert, "mlp.experts.%lld.%s", (long long)e, proj), LAYER(expert))
                UP(EXPERT("gate_proj.weight"), 2, J, H, w->e13, (e * 2 * J) * H * 2);
                UP(EXPERT("up_proj.weight"), 2, J, H, w->e13, (e * 2 * J + J) * H * 2);
                UP(EXPERT("down_proj.weight"), 2, H, J, w->e2, e * H * J * 2);
#undef EXPERT
            }
        } else { /* gate rows, then up rows: talon_gemm's gated layout */
            LINEAR(w->w13, 2 * I, I, H, "mlp.gate_proj.weight", 0);
            LINEAR(w->w13, 2 * I, I, H, "mlp.up_proj.weight", I);
            LINEAR(w->w2, H, H, I, "mlp.down_proj.weight", 0);
        }
#undef LINEAR
#undef LAYER
    }
#undef NEW
#undef UP
    return 0;
}

/* Llama 3.1's frequency scaling (rope_scaling type "llama3"), as a cos/sin cache:
   long wavelengths slowed by `factor`, short ones kept, a smooth blend between. */
static int build_rope_cache(llm *m, char *err, size_t err_len) {
    const int64_t half = m->D / 2, rows = m->o.max_seq;
    const model_config *c = &m->c;
    const double low_wl = (double)c->rope_original_max_pos / c->rope_low_freq_factor;
    const double high_wl = (double)c->rope_original_max_pos / c->rope_high_freq_factor;
    float *host = (float *)malloc((size_t)(rows * m->D) * sizeof(float));
    double *inv = (double *)malloc((size_t)half * sizeof(double));
    int64_t i, p;
    if (!host || !inv) {
        free(host); free(inv);
        set_err(err, err_len, "llm: out of host memory for the rope cache");
        return -1;
    }
    for (i = 0; i < half; i++) {
        const double f = pow(c->rope_theta, -2.0 * (double)i / (double)m->D);
        const double wl = 2.0 * PI / f;
        if (wl < high_wl) {
            inv[i] = f;
        } else if (wl > low_wl) {
            inv[i] = f / c->rope_factor;
        } else {
            const double s = ((double)c->rope_original_max_pos / wl - c->rope_low_freq_factor) /
                             (c->rope_high_freq_factor - c->rope_low_freq_factor);
            inv[i] = (1.0 - s) * f / c->rope_factor + s * f;
        }
    }
    for (p = 0; p < rows; p++)
        for (i = 0; i < half; i++) {
            host[p * m->D + i] = (float)cos((double)p * inv[i]);
            host[p * m->D + half + i] = (float)sin((double)p * inv[i]);
        }
    free(inv);
    if (dev_alloc(m, &m->rope_cache, rows * m->D * 4, err, err_len)) {
        free(host);
        return -1;
    }
    {
        const CUresult r = cuMemcpyHtoD(m->rope_cache, host, (size_t)(rows * m->D) * 4);
        free(host);
        if (r != CUDA_SUCCESS) return cu_fail(r, "cuMemcpyHtoD(rope cache)", err, err_len);
    }
    return 0;
}

/* ---------------------------------------------------------------- set-up */
static int setup(llm *m, const char *dir, char *err, size_t err_len) {
    const model_config *c = &m->c;
    st_model *st;
    int64_t l, b, j, bytes;
    int rc;
    if (model_config_load(&m->c, dir, err, err_len)) return -1;
    if (c->attention_bias) {
        set_err(err, err_len, "llm: attention_bias = true is not supported");
        return -1;
    }
    if (m->o.fp8 && (c->arch != MODEL_LLAMA || c->hidden_size % 128 || c->intermediate_size % 128 ||
                     (c->num_attention_heads * c->head_dim) % 128 ||
                     (c->num_key_value_heads * c->head_dim) % 128)) {
        set_err(err, err_len, "llm: the fp8 mode takes Llama-style models whose projection "
                "widths are multiples of 128 (128 x 128 weight blocks)");
        return -1;
    }
    m->layers = m->o.layers ? m->o.layers : c->num_hidden_layers;
    if (m->layers < 1 || m->layers > c->num_hidden_layers) {
        set_err(err, err_len, "llm: layers = %lld, the model has %lld", (long long)m->layers,
                (long long)c->num_hidden_layers);
        return -1;
    }
    if (m->o.max_batch < 1 || m->o.max_batch > 1024 || m->o.max_seq < 1 ||
        m->o.max_prefill < 1) {
        set_err(err, err_len, "llm: max_batch = %lld (1..1024), max_seq = %lld, max_prefill = "
                "%lld must be positive", (long long)m->o.max_batch, (long long)m->o.max_seq,
                (long long)m->o.max_prefill);
        return -1;
    }
    m->top_k = m->o.top_k > 1 ? m->o.top_k : 1;
    if (m->top_k > 1024 || m->top_k > c->vocab_size || (m->top_k > 1 && !(m->o.temperature > 0))) {
        set_err(err, err_len, "llm: top_k = %lld (at most 1024 and the vocabulary) with "
                "temperature %g (> 0)", (long long)m->o.top_k, (double)m->o.temperature);
        return -1;
    }
    m->rng = m->o.seed;
    m->H = c->hidden_size; m->Hq = c->num_attention_heads; m->Hk = c->num_key_value_heads;
    m->D = c->head_dim; m->I = c->intermediate_size; m->V = c->vocab_size;
    if (c->arch == MODEL_QWEN3_MOE) {
        m->E = c->num_experts;
        m->moe_k = c->num_experts_per_tok;
        m->moe_I = c->moe_intermediate_size;
    }
    m->w = (layer_weights *)calloc((size_t)m->layers, sizeof *m->w);
    m->k_cache = (CUdeviceptr *)calloc((size_t)m->layers, sizeof(CUdeviceptr));
    m->v_cache = (CUdeviceptr *)calloc((size_t)m->layers, sizeof(CUdeviceptr));
    m->seq_len = (int64_t *)calloc((size_t)m->o.max_batch, sizeof(int64_t));
    m->pages_per_seq = (m->o.max_seq + PAGE_SIZE - 1) / PAGE_SIZE;
    m->num_pages = m->pages_per_seq * m->o.max_batch;
    m->page_table_host = (int32_t *)calloc((size_t)m->num_pages, sizeof(int32_t));
    if (!m->w || !m->k_cache || !m->v_cache || !m->seq_len || !m->page_table_host) {
        set_err(err, err_len, "llm: out of host memory");
        return -1;
    }

    st = st_open(dir, err, err_len);
    if (!st) return -1;
    rc = load_weights(m, st, err, err_len);
    st_close(st);
    if (rc) return -1;
    if (c->rope_scaling == 1 && build_rope_cache(m, err, err_len)) return -1;

    /* The paged KV cache: sequence b's j-th page is page j * max_batch + b (interleaved, so
       the page tables are not trivially contiguous). */
    for (l = 0; l < m->layers; l++) {
        const int64_t elems = m->num_pages * PAGE_SIZE * m->Hk * m->D;
        if (dev_alloc(m, &m->k_cache[l], elems * 2, err, err_len) ||
            dev_alloc(m, &m->v_cache[l], elems * 2, err, err_len))
            return -1;
    }
    for (b = 0; b < m->o.max_batch; b++)
        for (j = 0; j < m->pages_per_seq; j++)
            m->page_table_host[b * m->pages_per_seq + j] = (int32_t)(j * m->o.max_batch + b);

    m->rows = m->o.max_prefill > m->o.max_batch ? m->o.max_prefill : m->o.max_batch;
#define NEW(p, bytes) if (dev_alloc(m, &(p), (int64_t)(bytes), err, err_len)) return -1
    NEW(m->x, m->rows * m->H * 2);
    NEW(m->h, m->rows * m->H * 2);
    NEW(m->q, m->rows * m->Hq * m->D * 2);
    NEW(m->k, m->rows * m->Hk * m->D * 2);
    NEW(m->v, m->rows * m->Hk * m->D * 2);
    NEW(m->attn, m->rows * m->Hq * m->D * 2);
    NEW(m->mlp, m->rows * m->I * 2);
    if (m->o.fp8) { /* the widest projection input: hidden, q heads or the MLP's width */
        const int64_t k = m->I > m->H ? (m->I > m->Hq * m->D ? m->I : m->Hq * m->D)
                                      : (m->H > m->Hq * m->D ? m->H : m->Hq * m->D);
        NEW(m->act8, m->rows * k);
        NEW(m->act8_scale, (k / 128) * ((m->rows + 3) / 4 * 4) * 4);
    }
    if (m->E) {
        TL(talon_moe_align_block_size_capacity(m->rows, m->moe_k, m->E, 128, &m->sorted_cap,
                                               &m->blocks_cap));
        NEW(m->router_logits, m->rows * m->E * 2);
        NEW(m->topk_weights, m->rows * m->moe_k * 4);
        NEW(m->topk_ids, m->rows * m->moe_k * 4);
        NEW(m->sorted_ids, m->sorted_cap * 4);
        NEW(m->expert_ids, m->blocks_cap * 4);
        NEW(m->num_post, 16);
        NEW(m->moe_inter, m->sorted_cap * m->moe_I * 2);
        NEW(m->moe_pairs, m->rows * m->moe_k * m->H * 2);
        NEW(m->moe_out, m->rows * m->H * 2);
    }
    NEW(m->last, m->o.max_batch * m->H * 2);
    NEW(m->logits, m->o.max_batch * m->V * 4);
    if (m->o.all_logits) NEW(m->all_logits, m->o.max_prefill * m->V * 4);
    NEW(m->ids, m->rows * 4);
    NEW(m->positions, m->rows * 4);
    NEW(m->slots, m->rows * 8);
    NEW(m->cu_seqlens, (m->o.max_batch + 1) * 4);
    NEW(m->last_rows, m->o.max_batch * 4);
    NEW(m->page_table, m->num_pages * 4);
    NEW(m->kv_lens, m->o.max_batch * 4);
    NEW(m->next_ids, m->o.max_batch * 4);
    NEW(m->top_values, m->o.max_batch * m->top_k * 4);
    if (m->top_k > 1) {
        NEW(m->cand_ids, m->o.max_batch * m->top_k * 4);
        m->cand_values_host = (float *)malloc((size_t)(m->o.max_batch * m->top_k) * 4);
        m->cand_ids_host = (int32_t *)malloc((size_t)(m->o.max_batch * m->top_k) * 4);
        if (!m->cand_values_host || !m->cand_ids_host) {
            set_err(err, err_len, "llm: out of host memory");
            return -1;
        }
    }
    CU(cuMemcpyHtoD(m->page_table, m->page_table_host, (size_t)m->num_pages * 4));

    /* Workspaces: the largest over every batch size a call may use (sizes need not grow with
       the batch; talon.h, WORKSPACES). */
    {
        talon_topk_args t;
        talon_decode_attention_args d;
        talon_prefill_attention_args p;
        memset(&t, 0, sizeof t);
        memset(&d, 0, sizeof d);
        memset(&p, 0, sizeof p);
        t.cols = m->V; t.k = m->top_k; t.dtype = TALON_DTYPE_F32;
        d.num_qo_heads = m->Hq; d.num_kv_heads = m->Hk; d.head_dim = m->D;
        d.page_size = PAGE_SIZE; d.page_table_stride = m->pages_per_seq;
        d.max_kv_len = m->o.max_seq;
        for (b = 1; b <= m->o.max_batch; b++) {
            t.rows = b;
            d.batch = b;
            TL(talon_topk_workspace_size(m->ctx, &t, &bytes));
            if (bytes > m->topk_ws_bytes) m->topk_ws_bytes = bytes;
            TL(talon_decode_attention_workspace_size(m->ctx, &d, &bytes));
            if (bytes > m->decode_ws_bytes) m->decode_ws_bytes = bytes;
        }
        /* the prompt's causal attention over its own tokens (no cached prefix) never splits
           its keys (talon.h, talon_prefill_attention): the counter's 16 bytes; the op says
           so if a call ever needs more */
        p.batch = m->o.max_batch; p.total_q = p.total_kv = p.max_seqlen_q = m->o.max_seq;
        p.num_qo_heads = m->Hq; p.num_kv_heads = m->Hk; p.head_dim = m->D; p.causal = 1;
        TL(talon_prefill_attention_workspace_size(m->ctx, &p, &m->prefill_ws_bytes));
        NEW(m->prefill_ws, m->prefill_ws_bytes);
        NEW(m->topk_ws, m->topk_ws_bytes);
        NEW(m->decode_ws, m->decode_ws_bytes);
    }
#undef NEW
    return 0;
}

llm *llm_load(const char *model_dir, const llm_options *opt, talon_ctx *ctx, CUstream stream,
              char *err, size_t err_len) {
    llm *m = (llm *)calloc(1, sizeof *m);
    if (!m) {
        set_err(err, err_len, "llm: out of host memory");
        return NULL;
    }
    m->o = *opt;
    m->ctx = ctx;
    m->stream = stream;
    if (setup(m, model_dir, err, err_len)) {
        llm_free(m);
        return NULL;
    }
    return m;
}

void llm_free(llm *m) {
    int i;
    if (!m) return;
    if (m->step_graph) cuGraphExecDestroy(m->step_graph);
    for (i = 0; i < MAX_MARKS; i++)
        if (m->mark_events[i]) cuEventDestroy(m->mark_events[i]);
    for (i = 0; i < m->num_allocs; i++) cuMemFree(m->allocs[i]);
    free(m->w); free(m->k_cache); free(m->v_cache); free(m->seq_len); free(m->page_table_host);
    free(m->cand_values_host); free(m->cand_ids_host);
    free(m);
}

const model_config *llm_config(const llm *m) { return &m->c; }

/* ---------------------------------------------------------------- the forward pass */
/* d[rows, n] = a[rows, k] w[n, k]^T (+ d when residual; gated: w is [2n, k], SwiGLU). */
static talon_status linear(llm *m, CUdeviceptr d, CUdeviceptr a, CUdeviceptr w, int64_t rows,
                           int64_t n, int64_t k, int residual, int gated, talon_dtype out) {
    talon_gemm_args g;
    memset(&g, 0, sizeof g);
    g.d = d; g.a = a; g.b = w; g.m = rows; g.n = n; g.k = k;
    if (residual) g.c = d;
    if (gated) {
        g.gated = 1;
        g.act = TALON_GEMM_ACT_SILU;
    }
    g.out_dtype = out;
    return talon_gemm(m->ctx, m->stream, &g);
}

/* The input a [rows, k] of the projections that follow. fp8 mode: quantised to e4m3 per row
   and 128 columns (talon_quant_fp8, group scales in the layout talon_gemm's block mode reads),
   once for the projections that share it. bf16: nothing to do. */
static talon_status dense_input(llm *m, CUdeviceptr a, int64_t rows, int64_t k) {
    talon_quant_fp8_args q;
    if (!m->o.fp8) return TALON_SUCCESS;
    memset(&q, 0, sizeof q);
    q.out = m->act8; q.in = a; q.scale = m->act8_scale; q.rows = rows; q.cols = k;
    q.mode = TALON_QUANT_GROUP;
    return talon_quant_fp8(m->ctx, m->stream, &q);
}

/* d[rows, n] = a w^T (+ d when residual; gated: w is [2n, k], SwiGLU) for a projection weight:
   bf16, or fp8 with block scales on the quantised copy of a that the last dense_input made
   (the callers quantise a right before its projections). */
static talon_status dense(llm *m, CUdeviceptr d, CUdeviceptr a, const weight *w, int64_t rows,
                          int64_t n, int64_t k, int residual, int gated) {
    talon_gemm_args g;
    if (!w->scale) return linear(m, d, a, w->w, rows, n, k, residual, gated, TALON_DTYPE_BF16);
    memset(&g, 0, sizeof g);
    g.d = d; g.a = m->act8; g.b = w->w; g.m = rows; g.n = n; g.k = k;
    g.a_scale = m->act8_scale; g.b_scale = w->scale;
    if (residual) g.c = d;
    if (gated) {
        g.gated = 1;
        g.act = TALON_GEMM_ACT_SILU;
    }
    g.dtype = TALON_DTYPE_FP8_E4M3;
    g.out_dtype = TALON_DTYPE_BF16;
    g.scale = TALON_GEMM_SCALE_BLOCK;
    return talon_gemm(m->ctx, m->stream, &g);
}

/* out[rows, cols] = rmsnorm(in) * w (cols 0: hidden); out may be in. */
static talon_status rmsnorm(llm *m, CUdeviceptr out, CUdeviceptr in, CUdeviceptr w,
                            int64_t rows, int64_t cols) {
    talon_rmsnorm_args a;
    memset(&a, 0, sizeof a);
    a.out = out; a.in = in; a.weight = w; a.rows = rows; a.cols = cols ? cols : m->H;
    a.eps = (float)m->c.rms_norm_eps;
    return talon_rmsnorm(m->ctx, m->stream, &a);
}

/* h = rmsnorm(x) * w, where x may still owe the last MoE layer's output (moe_out, *pending):
   then x += moe_out first and the normalised rows land in moe_out itself
   (talon_fused_add_rmsnorm); *h says which buffer holds them. */
static talon_status norm_into(llm *m, CUdeviceptr w, int64_t rows, int *pending,
                              CUdeviceptr *h) {
    talon_fused_add_rmsnorm_args a;
    if (!*pending) {
        *h = m->h;
        return rmsnorm(m, m->h, m->x, w, rows, 0);
    }
    memset(&a, 0, sizeof a);
    a.in = m->moe_out; a.residual = m->x; a.weight = w; a.rows = rows; a.cols = m->H;
    a.eps = (float)m->c.rms_norm_eps;
    *pending = 0;
    *h = m->moe_out;
    return talon_fused_add_rmsnorm(m->ctx, m->stream, &a);
}

/* The MoE MLP on `rows` normalised rows h: router, top-k, moe_align, the two expert GEMMs,
   the sum of each token's k outputs into moe_out (added to x by the next norm). */
static int moe_mlp(llm *m, const layer_weights *w, CUdeviceptr h, int64_t rows, char *err,
                   size_t err_len) {
    talon_moe_router_topk_args r;
    talon_moe_align_block_size_args al;
    talon_moe_gemm_args g;
    talon_moe_sum_args sum;
    MARK("moe router");
    /* router logits in bf16, as transformers computes them (a bf16 linear layer) */
    TL(linear(m, m->router_logits, h, w->router, rows, m->E, m->H, 0, 0, TALON_DTYPE_BF16));
    memset(&r, 0, sizeof r);
    r.topk_weights = m->topk_weights; r.topk_ids = m->topk_ids; r.logits = m->router_logits;
    r.tokens = rows; r.experts = m->E; r.k = m->moe_k; r.logits_dtype = TALON_DTYPE_BF16;
    r.renormalize = m->c.norm_topk_prob;
    TL(talon_moe_router_topk(m->ctx, m->stream, &r));
    MARK("moe_align");
    memset(&al, 0, sizeof al);
    al.sorted_token_ids = m->sorted_ids; al.expert_ids = m->expert_ids;
    al.num_tokens_post_padded = m->num_post; al.topk_ids = m->topk_ids;
    al.tokens = rows; al.k = m->moe_k; al.experts = m->E; al.block_size = 128;
    al.sorted_capacity = m->sorted_cap; al.expert_ids_capacity = m->blocks_cap;
    TL(talon_moe_align_block_size(m->ctx, m->stream, &al));
    memset(&g, 0, sizeof g);
    g.sorted_token_ids = m->sorted_ids; g.expert_ids = m->expert_ids;
    g.num_tokens_post_padded = m->num_post;
    g.tokens = rows; g.topk = m->moe_k; g.experts = m->E; g.block_size = 128;
    g.sorted_capacity = m->sorted_cap; g.expert_ids_capacity = m->blocks_cap;
    MARK("moe gate/up (SwiGLU)");
    /* gate/up: the tokens' rows gathered, SwiGLU, sorted rows out */
    g.d = m->moe_inter; g.a = h; g.b = w->e13; g.n = m->moe_I; g.k = m->H;
    g.a_rows = TALON_MOE_ROWS_TOKEN; g.d_rows = TALON_MOE_ROWS_SORTED;
    g.act = TALON_GEMM_ACT_SILU; g.gated = 1;
    TL(talon_moe_gemm(m->ctx, m->stream, &g));
    MARK("moe down");
    /* down: sorted rows in, weighted by the router, one row per (token, slot) out */
    g.d = m->moe_pairs; g.a = m->moe_inter; g.b = w->e2; g.n = m->H; g.k = m->moe_I;
    g.topk_weights = m->topk_weights;
    g.a_rows = TALON_MOE_ROWS_SORTED; g.d_rows = TALON_MOE_ROWS_PAIR;
    g.act = TALON_GEMM_ACT_NONE; g.gated = 0;
    TL(talon_moe_gemm(m->ctx, m->stream, &g));
    MARK("moe_sum");
    memset(&sum, 0, sizeof sum);
    sum.out = m->moe_out; sum.in = m->moe_pairs; sum.tokens = rows; sum.k = m->moe_k;
    sum.hidden = m->H;
    TL(talon_moe_sum(m->ctx, m->stream, &sum));
    return 0;
}

/* The layers on `rows` rows of x (embedded tokens), whose positions, slots and (prefill)
   cu_seqlens or (decode) kv_lens are on the device. decode: one row per sequence, attention
   over the cache; else `batch` prompts of at most max_q tokens each. On return x holds the
   last layer's output (a pending MoE output is added by the final norm's fused add). */
static int run_layers(llm *m, int64_t rows, int64_t batch, int decode, int64_t max_q, char *err,
                      size_t err_len) {
    const int64_t qn = m->Hq * m->D, kvn = m->Hk * m->D;
    int64_t l;
    int pending = 0;
    CUdeviceptr h;
    for (l = 0; l < m->layers; l++) {
        const layer_weights *w = &m->w[l];
        talon_rope_args r;
        talon_kv_append_args kv;
        MARK("attention norm");
        TL(norm_into(m, w->attn_norm, rows, &pending, &h));
        MARK("q, k, v projections");
        TL(dense_input(m, h, rows, m->H));
        TL(dense(m, m->q, h, &w->wq, rows, qn, m->H, 0, 0));
        TL(dense(m, m->k, h, &w->wk, rows, kvn, m->H, 0, 0));
        TL(dense(m, m->v, h, &w->wv, rows, kvn, m->H, 0, 0));
        if (w->q_norm) { /* in place, one row per head */
            MARK("q, k norms");
            TL(rmsnorm(m, m->q, m->q, w->q_norm, rows * m->Hq, m->D));
            TL(rmsnorm(m, m->k, m->k, w->k_norm, rows * m->Hk, m->D));
        }

        MARK("rope");
        memset(&r, 0, sizeof r);
        r.q = m->q; r.k = m->k; r.positions = m->positions; r.tokens = rows;
        r.num_q_heads = m->Hq; r.num_kv_heads = m->Hk; r.head_dim = m->D;
        if (m->rope_cache) {
            r.cos_sin_cache = m->rope_cache;
            r.max_pos = m->o.max_seq;
        } else {
            r.theta = (float)m->c.rope_theta;
        }
        TL(talon_rope(m->ctx, m->stream, &r));

        MARK("kv_append");
        memset(&kv, 0, sizeof kv);
        kv.k_cache = m->k_cache[l]; kv.v_cache = m->v_cache[l]; kv.k = m->k; kv.v = m->v;
        kv.slot_mapping = m->slots; kv.tokens = rows; kv.num_kv_heads = m->Hk;
        kv.head_dim = m->D; kv.num_pages = m->num_pages; kv.page_size = PAGE_SIZE;
        TL(talon_kv_append(m->ctx, m->stream, &kv));

        MARK("attention");
        if (decode) {
            talon_decode_attention_args d;
            memset(&d, 0, sizeof d);
            d.o = m->attn; d.q = m->q; d.k_cache = m->k_cache[l]; d.v_cache = m->v_cache[l];
            d.page_table = m->page_table; d.kv_lens = m->kv_lens;
            d.workspace = m->decode_ws; d.workspace_bytes = m->decode_ws_bytes;
            d.batch = rows; d.num_qo_heads = m->Hq; d.num_kv_heads = m->Hk;
            d.head_dim = m->D; d.page_size = PAGE_SIZE; d.page_table_stride = m->pages_per_seq;
            d.max_kv_len = m->o.max_seq; d.num_pages = m->num_pages;
            TL(talon_decode_attention(m->ctx, m->stream, &d));
        } else {
            talon_prefill_attention_args p;
            memset(&p, 0, sizeof p);
            p.o = m->attn; p.q = m->q; p.k = m->k; p.v = m->v;
            p.cu_seqlens_q = m->cu_seqlens; p.cu_seqlens_k = m->cu_seqlens;
            p.workspace = m->prefill_ws; p.workspace_bytes = m->prefill_ws_bytes;
            p.batch = batch; p.total_q = rows; p.total_kv = rows; p.max_seqlen_q = max_q;
            p.num_qo_heads = m->Hq; p.num_kv_heads = m->Hk; p.head_dim = m->D;
            p.causal = 1;
            TL(talon_prefill_attention(m->ctx, m->stream, &p));
        }
        MARK("o projection + residual");
        TL(dense_input(m, m->attn, rows, qn));
        TL(dense(m, m->x, m->attn, &w->wo, rows, m->H, qn, 1, 0));
        MARK("mlp norm");
        TL(norm_into(m, w->mlp_norm, rows, &pending, &h));
        if (w->moe) {
            if (moe_mlp(m, w, h, rows, err, err_len)) return -1;
            pending = 1;
        } else {
            MARK("mlp gate/up (SwiGLU)");
            TL(dense_input(m, h, rows, m->H));
            TL(dense(m, m->mlp, h, &w->w13, rows, m->I, m->H, 0, 1));
            MARK("mlp down + residual");
            TL(dense_input(m, m->mlp, rows, m->I));
            TL(dense(m, m->x, m->mlp, &w->w2, rows, m->H, m->I, 1, 0));
        }
    }
    if (pending) {
        MARK("final residual add");
        TL(norm_into(m, m->final_norm, rows, &pending, &h)); /* x += moe_out */
    }
    return 0;
}

/* x = embedding rows of `ids` (rows of them). */
static int embed(llm *m, CUdeviceptr ids, int64_t rows, char *err, size_t err_len) {
    talon_gather_rows_args g;
    MARK("embedding");
    memset(&g, 0, sizeof g);
    g.out = m->x; g.in = m->embed; g.indices = ids; g.rows = rows; g.cols = m->H;
    g.in_rows = m->V;
    TL(talon_gather_rows(m->ctx, m->stream, &g));
    return 0;
}

/* logits [batch, V] (fp32) of the x rows listed in last_rows (or the first batch rows when
   last_rows is 0), and the greedy token of each into next_ids. */
static int head(llm *m, int64_t batch, CUdeviceptr last_rows, char *err, size_t err_len) {
    talon_topk_args t;
    CUdeviceptr src = m->x;
    if (last_rows) {
        talon_gather_rows_args g;
        memset(&g, 0, sizeof g);
        g.out = m->last; g.in = m->x; g.indices = last_rows; g.rows = batch; g.cols = m->H;
        g.in_rows = m->rows;
        TL(talon_gather_rows(m->ctx, m->stream, &g));
        src = m->last;
    }
    MARK("final norm");
    TL(rmsnorm(m, m->h, src, m->final_norm, batch, 0));
    MARK("lm head");
    TL(linear(m, m->logits, m->h, m->lm_head, batch, m->V, m->H, 0, 0, TALON_DTYPE_F32));
    MARK(m->top_k > 1 ? "top-k candidates" : "greedy top-1");
    memset(&t, 0, sizeof t);
    t.out_values = m->top_values; t.in = m->logits;
    t.out_indices = m->top_k > 1 ? m->cand_ids : m->next_ids; /* greedy: the next input */
    t.workspace = m->topk_ws; t.workspace_bytes = m->topk_ws_bytes;
    t.rows = batch; t.cols = m->V; t.k = m->top_k; t.sorted = 1; t.dtype = TALON_DTYPE_F32;
    TL(talon_topk(m->ctx, m->stream, &t));
    return 0;
}

static int64_t slot_of(const llm *m, int64_t seq, int64_t pos) {
    return (int64_t)m->page_table_host[seq * m->pages_per_seq + pos / PAGE_SIZE] * PAGE_SIZE +
           pos % PAGE_SIZE;
}

/* Top-k sampling (top_k > 1): waits for the step, draws each sequence's token from its k
   candidates on the host and queues it into next_ids (a pageable copy: read on return). */
static int sample_next(llm *m, int64_t batch, char *err, size_t err_len) {
    const int64_t k = m->top_k;
    int32_t next[1024];
    int64_t b;
    CU(cuStreamSynchronize(m->stream));
    CU(cuMemcpyDtoH(m->cand_values_host, m->top_values, (size_t)(batch * k) * 4));
    CU(cuMemcpyDtoH(m->cand_ids_host, m->cand_ids, (size_t)(batch * k) * 4));
    for (b = 0; b < batch; b++)
        next[b] = sample_top_k(m->cand_values_host + b * k, m->cand_ids_host + b * k, (int)k,
                               m->o.temperature, &m->rng);
    CU(cuMemcpyHtoDAsync(m->next_ids, next, (size_t)batch * 4, m->stream));
    return 0;
}

int llm_prefill(llm *m, int64_t batch, const int32_t *tokens, const int64_t *offsets,
                const int64_t *lens, int all_positions, float *logits, int32_t *next,
                double *forward_ms, char *err, size_t err_len) {
    int64_t total = 0, max_q = 0, b, i, t;
    int32_t *ids = NULL, *pos = NULL, *cu = NULL, *last = NULL;
    int64_t *slots = NULL;
    CUevent start = NULL, stop = NULL;
    int rc = -1;
    if (batch < 1 || batch > m->o.max_batch) {
        set_err(err, err_len, "llm_prefill: batch = %lld, max_batch = %lld", (long long)batch,
                (long long)m->o.max_batch);
        return -1;
    }
    if (all_positions && !m->o.all_logits) {
        set_err(err, err_len, "llm_prefill: all_positions needs llm_options.all_logits");
        return -1;
    }
    for (b = 0; b < batch; b++) {
        if (lens[b] < 1 || lens[b] > m->o.max_seq) {
            set_err(err, err_len, "llm_prefill: prompt %lld has %lld tokens (1..max_seq = %lld)",
                    (long long)b, (long long)lens[b], (long long)m->o.max_seq);
            return -1;
        }
        total += lens[b];
        if (lens[b] > max_q) max_q = lens[b];
    }
    if (total > m->o.max_prefill) {
        set_err(err, err_len, "llm_prefill: %lld prompt tokens, max_prefill = %lld",
                (long long)total, (long long)m->o.max_prefill);
        return -1;
    }
    ids = (int32_t *)malloc((size_t)total * 4);
    pos = (int32_t *)malloc((size_t)total * 4);
    slots = (int64_t *)malloc((size_t)total * 8);
    cu = (int32_t *)malloc((size_t)(batch + 1) * 4);
    last = (int32_t *)malloc((size_t)batch * 4);
    if (!ids || !pos || !slots || !cu || !last) {
        set_err(err, err_len, "llm_prefill: out of host memory");
        goto done;
    }
    for (b = 0, t = 0; b < batch; b++) {
        cu[b] = (int32_t)t;
        for (i = 0; i < lens[b]; i++, t++) {
            ids[t] = tokens[offsets[b] + i];
            if (ids[t] < 0 || ids[t] >= m->V) {
                set_err(err, err_len, "llm_prefill: prompt %lld token %lld = %d is outside the "
                        "vocabulary (%lld)", (long long)b, (long long)i, ids[t], (long long)m->V);
                goto done;
            }
            pos[t] = (int32_t)i;
            slots[t] = slot_of(m, b, i);
        }
        last[b] = (int32_t)(t - 1);
        m->seq_len[b] = lens[b];
    }
    cu[batch] = (int32_t)total;
    m->batch = batch;
    CUG(cuMemcpyHtoDAsync(m->ids, ids, (size_t)total * 4, m->stream));
    CUG(cuMemcpyHtoDAsync(m->positions, pos, (size_t)total * 4, m->stream));
    CUG(cuMemcpyHtoDAsync(m->slots, slots, (size_t)total * 8, m->stream));
    CUG(cuMemcpyHtoDAsync(m->cu_seqlens, cu, (size_t)(batch + 1) * 4, m->stream));
    CUG(cuMemcpyHtoDAsync(m->last_rows, last, (size_t)batch * 4, m->stream));
    CUG(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CUG(cuEventCreate(&stop, CU_EVENT_DEFAULT));
    CUG(cuEventRecord(start, m->stream));
    if (embed(m, m->ids, total, err, err_len) ||
        run_layers(m, total, batch, 0, max_q, err, err_len) ||
        head(m, batch, m->last_rows, err, err_len))
        goto done;
    if (all_positions) {
        if (rmsnorm(m, m->h, m->x, m->final_norm, total, 0) != TALON_SUCCESS ||
            linear(m, m->all_logits, m->h, m->lm_head, total, m->V, m->H, 0, 0,
                   TALON_DTYPE_F32) != TALON_SUCCESS) {
            set_err(err, err_len, "%s", talon_last_error());
            goto done;
        }
    }
    CUG(cuEventRecord(stop, m->stream));
    if (m->top_k > 1 && sample_next(m, batch, err, err_len)) goto done;
    CUG(cuStreamSynchronize(m->stream));
    if (forward_ms) {
        float ms = 0;
        CUG(cuEventElapsedTime(&ms, start, stop));
        *forward_ms = ms;
    }
    CUG(cuMemcpyDtoH(next, m->next_ids, (size_t)batch * 4));
    if (logits)
        CUG(cuMemcpyDtoH(logits, all_positions ? m->all_logits : m->logits,
                         (size_t)((all_positions ? total : batch) * m->V) * 4));
    rc = 0;
done:
    if (start) cuEventDestroy(start);
    if (stop) cuEventDestroy(stop);
    free(ids); free(pos); free(slots); free(cu); free(last);
    return rc;
}

/* Sets the device's positions, kv_lens and slots for a decode step at each sequence's position
   seq_len[b] (host arrays of at least batch entries). */
static int step_inputs(llm *m, int32_t *pos, int32_t *kv_lens, int64_t *slots, char *err,
                       size_t err_len) {
    int64_t b;
    for (b = 0; b < m->batch; b++) {
        pos[b] = (int32_t)m->seq_len[b];
        kv_lens[b] = (int32_t)(m->seq_len[b] + 1);
        slots[b] = slot_of(m, b, m->seq_len[b]);
    }
    CU(cuMemcpyHtoDAsync(m->positions, pos, (size_t)m->batch * 4, m->stream));
    CU(cuMemcpyHtoDAsync(m->kv_lens, kv_lens, (size_t)m->batch * 4, m->stream));
    CU(cuMemcpyHtoDAsync(m->slots, slots, (size_t)m->batch * 8, m->stream));
    return 0;
}

/* One decode step for m->batch sequences: next_ids in, next_ids out. */
static int decode_step(llm *m, char *err, size_t err_len) {
    if (embed(m, m->next_ids, m->batch, err, err_len) ||
        run_layers(m, m->batch, m->batch, 1, 1, err, err_len) ||
        head(m, m->batch, 0, err, err_len))
        return -1;
    return 0;
}

int llm_decode(llm *m, int64_t steps, const int32_t *force, int32_t *out, float *logits,
               double *step_ms, char *err, size_t err_len) {
    const int64_t B = m->batch;
    int32_t pos[1024], kv_lens[1024];   /* max_batch <= 1024 */
    int64_t slots[1024], s, b;
    CUdeviceptr history = 0;
    CUevent start = NULL, stop = NULL;
    int rc = -1;
    if (B < 1) {
        set_err(err, err_len, "llm_decode: no prefill yet");
        return -1;
    }
    for (b = 0; b < B; b++)
        if (m->seq_len[b] + steps > m->o.max_seq) {
            set_err(err, err_len, "llm_decode: sequence %lld would reach %lld tokens, max_seq = "
                    "%lld", (long long)b, (long long)(m->seq_len[b] + steps),
                    (long long)m->o.max_seq);
            return -1;
        }
    CUG(cuMemAlloc(&history, (size_t)(steps * B) * 4 + 16));
    if (m->step_graph && m->graph_batch != B) {
        cuGraphExecDestroy(m->step_graph);
        m->step_graph = NULL;
    }
    if (!m->step_graph) {
        CUgraph g;
        CUG(cuStreamBeginCapture(m->stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
        if (decode_step(m, err, err_len)) {
            cuStreamEndCapture(m->stream, &g);
            goto done;
        }
        CUG(cuStreamEndCapture(m->stream, &g));
        CUG(cuGraphInstantiate(&m->step_graph, g, 0));
        cuGraphDestroy(g);
        m->graph_batch = B;
    }
    CUG(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CUG(cuEventCreate(&stop, CU_EVENT_DEFAULT));
    CUG(cuEventRecord(start, m->stream));
    for (s = 0; s < steps; s++) {
        /* pageable sources: each copy has read its host array when it returns */
        if (step_inputs(m, pos, kv_lens, slots, err, err_len)) goto done;
        for (b = 0; b < B; b++) m->seq_len[b]++;
        if (force) CUG(cuMemcpyHtoDAsync(m->next_ids, force + s * B, (size_t)B * 4, m->stream));
        CUG(cuGraphLaunch(m->step_graph, m->stream));
        if (m->top_k > 1 && sample_next(m, B, err, err_len)) goto done;
        CUG(cuMemcpyDtoDAsync(history + (CUdeviceptr)(s * B * 4), m->next_ids, (size_t)B * 4,
                              m->stream));
        if (logits) { /* a synchronous copy does not wait for a non-blocking stream */
            CUG(cuStreamSynchronize(m->stream));
            CUG(cuMemcpyDtoH(logits + s * B * m->V, m->logits, (size_t)(B * m->V) * 4));
        }
    }
    CUG(cuEventRecord(stop, m->stream));
    CUG(cuStreamSynchronize(m->stream));
    CUG(cuMemcpyDtoH(out, history, (size_t)(steps * B) * 4));
    if (step_ms) {
        float ms = 0;
        CUG(cuEventElapsedTime(&ms, start, stop));
        *step_ms = steps ? ms / (double)steps : 0;
    }
    rc = 0;
done:
    if (start) cuEventDestroy(start);
    if (stop) cuEventDestroy(stop);
    if (history) cuMemFree(history);
    return rc;
}

int llm_profile_decode(llm *m, int reps, llm_stage_time *out, int max, int *count,
                       double *step_us, char *err, size_t err_len) {
    int32_t pos[1024], kv_lens[1024];
    int64_t slots[1024], b;
    CUgraph g = NULL;
    CUgraphExec exec = NULL;
    int i, r, n = 0, rc = -1;
    double total = 0;
    *count = 0;
    if (m->batch < 1 || reps < 1) {
        set_err(err, err_len, "llm_profile_decode: no prefill yet, or reps = %d", reps);
        return -1;
    }
    for (b = 0; b < m->batch; b++)
        if (m->seq_len[b] >= m->o.max_seq) {
            set_err(err, err_len, "llm_profile_decode: sequence %lld is full", (long long)b);
            return -1;
        }
    for (i = 0; i < MAX_MARKS; i++)
        if (!m->mark_events[i]) CU(cuEventCreate(&m->mark_events[i], CU_EVENT_DEFAULT));
    if (step_inputs(m, pos, kv_lens, slots, err, err_len)) return -1;
    CU(cuStreamBeginCapture(m->stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    m->profiling = 1;
    m->marks = 0;
    if (decode_step(m, err, err_len)) {
        m->profiling = 0;
        cuStreamEndCapture(m->stream, &g);
        goto done;
    }
    {
        MARK("end");
    }
    m->profiling = 0;
    CUG(cuStreamEndCapture(m->stream, &g));
    CUG(cuGraphInstantiate(&exec, g, 0));
    if (m->marks >= MAX_MARKS) {
        set_err(err, err_len, "llm_profile_decode: more than %d stages", MAX_MARKS);
        goto done;
    }
    for (r = 0; r <= reps; r++) { /* replay 0 warms up */
        CUG(cuGraphLaunch(exec, m->stream));
        CUG(cuStreamSynchronize(m->stream));
        for (i = 0; r && i + 1 < m->marks; i++) {
            float ms = 0;
            int j;
            CUG(cuEventElapsedTime(&ms, m->mark_events[i], m->mark_events[i + 1]));
            for (j = 0; j < n && strcmp(out[j].name, m->mark_names[i]); j++) {}
            if (j == n) {
                if (n == max) continue;
                out[n].name = m->mark_names[i];
                out[n].us = 0;
                out[n].count = 0;
                n++;
            }
            out[j].us += ms * 1e3 / reps;
            if (r == 1) out[j].count++;
            total += ms * 1e3 / reps;
        }
    }
    *count = n;
    if (step_us) *step_us = total;
    rc = 0;
done:
    if (exec) cuGraphExecDestroy(exec);
    if (g) cuGraphDestroy(g);
    return rc;
}
