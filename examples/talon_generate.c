/* talon_generate - greedy generation with a Hugging Face Llama-style model on talon alone.

     talon_generate --model DIR --prompts FILE [--new N] [--layers L] [--tokens OUT]
                    [--logits OUT] [--all-logits] [--max-seq S] [--force FILE]
                    [--step-logits OUT] [--runs R] [--profile] [--fp8]
                    [--top-k K [--temperature T] [--seed S]]

   DIR holds config.json and model.safetensors (or a sharded index). FILE has one prompt per
   line, token ids separated by spaces. All prompts are prefilled together (one ragged batch),
   then N - 1 decode steps (one CUDA graph replayed) give N new tokens per prompt, written
   to --tokens (one line per prompt) and summarised on stdout with the timings.
   --logits writes fp32 logits (little-endian, row-major [rows, vocab]): the last prompt
   position of each prompt, or with --all-logits every prompt position (prompts in order).
   --layers runs only the first L layers (the weights of the others are not read).
   --force FILE (as --prompts, a line per prompt of at least N - 1 ids) feeds those tokens to
   the decode steps instead of the greedy ones (teacher forcing), and --step-logits writes each
   decode step's logits, fp32 [N - 1, prompts, vocab]: together they check the decode path's
   logits along a given sequence.
   Timing: the prefill's GPU time (CUDA events from the embedding lookup to the greedy
   tokens) and the mean decode step (events around the graph replays, the small per-step
   uploads included); --runs R repeats prefill and decode R times (the same prompts, fresh
   sequences) and reports the best; --profile then prints the decode step stage by stage
   (llm_profile_decode).
   --top-k K (> 1) samples each token from the K largest logits with probabilities
   softmax(logit / T) (--temperature, default 1; --seed, default 0) instead of the greedy
   choice: talon_topk picks the candidates on the GPU, the host draws (examples/sample.h).
   --fp8 runs the projections in fp8 (llm_options.fp8: weights quantised at load with a scale
   per 128 x 128 block, activations per token and 128 columns).
   Exit status 0 on success; errors go to stderr. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda.h>
#include "llm.h"
#include "talon.h"

typedef struct prompts {
    int32_t *tokens;
    int64_t *offsets, *lens;
    int64_t count, total;
} prompts;

static int read_prompts(const char *path, prompts *p, char *err, size_t n) {
    FILE *f = fopen(path, "r");
    char line[1 << 16];
    int64_t cap = 1024, pcap = 64, lineno = 0;
    memset(p, 0, sizeof *p);
    if (!f) {
        snprintf(err, n, "%s: cannot open", path);
        return -1;
    }
    p->tokens = (int32_t *)malloc((size_t)cap * 4);
    p->offsets = (int64_t *)malloc((size_t)pcap * 8);
    p->lens = (int64_t *)malloc((size_t)pcap * 8);
    while (p->tokens && p->offsets && p->lens && fgets(line, sizeof line, f)) {
        char *s = line, *end;
        int64_t len = 0;
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            snprintf(err, n, "%s:%lld: line longer than %zu bytes", path, (long long)lineno,
                     sizeof line);
            goto fail;
        }
        for (;;) {
            long long v;
            while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n') s++;
            if (!*s) break;
            v = strtoll(s, &end, 10);
            if (end == s || v < 0 || v > 0x7fffffff) {
                snprintf(err, n, "%s:%lld: not a token id: '%.20s'", path, (long long)lineno, s);
                goto fail;
            }
            s = end;
            if (p->total == cap) {
                int32_t *t = (int32_t *)realloc(p->tokens, (size_t)(cap *= 2) * 4);
                if (!t) goto oom;
                p->tokens = t;
            }
            p->tokens[p->total++] = (int32_t)v;
            len++;
        }
        if (!len) continue; /* blank line */
        if (p->count == pcap) {
            int64_t *o = (int64_t *)realloc(p->offsets, (size_t)(pcap * 2) * 8);
            int64_t *l = o ? (int64_t *)realloc(p->lens, (size_t)(pcap * 2) * 8) : NULL;
            if (o) p->offsets = o;
            if (!l) goto oom;
            p->lens = l;
            pcap *= 2;
        }
        p->offsets[p->count] = p->total - len;
        p->lens[p->count++] = len;
    }
    if (!p->tokens || !p->offsets || !p->lens) goto oom;
    fclose(f);
    if (!p->count) {
        snprintf(err, n, "%s: no prompt", path);
        return -1;
    }
    return 0;
oom:
    snprintf(err, n, "%s: out of memory", path);
fail:
    fclose(f);
    return -1;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int usage(void) {
    fprintf(stderr, "usage: talon_generate --model DIR --prompts FILE [--new N] [--layers L] "
                    "[--tokens OUT] [--logits OUT] [--all-logits] [--max-seq S] [--force FILE] "
                    "[--step-logits OUT] [--runs R] [--profile] [--fp8] [--top-k K --temperature T "
                    "--seed S]\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *model = NULL, *prompt_file = NULL, *tokens_out = NULL, *logits_out = NULL,
               *force_file = NULL, *step_logits_out = NULL;
    long long new_tokens = 32, layers = 0, max_seq = 0, runs = 1, r, top_k = 1;
    double temperature = 1.0;
    unsigned long long seed = 0;
    int all_logits = 0, profile = 0, fp8 = 0, i, status = 1;
    char err[1024];
    prompts p, forced;
    CUdevice dev = 0;
    CUcontext cu = NULL;
    CUstream stream = NULL;
    talon_ctx *ctx = NULL;
    talon_ctx_options topt;
    llm_options o;
    llm *m = NULL;
    float *logits = NULL, *step_logits = NULL;
    int32_t *first = NULL, *steps = NULL, *force = NULL;
    double t0, wall_ms = 0, prefill_ms = 0, step_ms = 0;
    int64_t b, s, max_len = 0, rows;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--all-logits")) { all_logits = 1; continue; }
        if (!strcmp(a, "--profile")) { profile = 1; continue; }
        if (!strcmp(a, "--fp8")) { fp8 = 1; continue; }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage();
        if (!v) return usage();
        if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--prompts")) prompt_file = v;
        else if (!strcmp(a, "--tokens")) tokens_out = v;
        else if (!strcmp(a, "--force")) force_file = v;
        else if (!strcmp(a, "--step-logits")) step_logits_out = v;
        else if (!strcmp(a, "--logits")) logits_out = v;
        else if (!strcmp(a, "--new")) new_tokens = atoll(v);
        else if (!strcmp(a, "--layers")) layers = atoll(v);
        else if (!strcmp(a, "--max-seq")) max_seq = atoll(v);
        else if (!strcmp(a, "--runs")) runs = atoll(v);
        else if (!strcmp(a, "--top-k")) top_k = atoll(v);
        else if (!strcmp(a, "--temperature")) temperature = atof(v);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
        else return usage();
        i++;
    }
    if (!model || !prompt_file || new_tokens < 1 || layers < 0 || max_seq < 0 || runs < 1)
        return usage();
    if (read_prompts(prompt_file, &p, err, sizeof err)) {
        fprintf(stderr, "talon_generate: %s\n", err);
        return 1;
    }
    for (b = 0; b < p.count; b++)
        if (p.lens[b] > max_len) max_len = p.lens[b];
    memset(&forced, 0, sizeof forced);
    if (force_file) {
        if (read_prompts(force_file, &forced, err, sizeof err)) {
            fprintf(stderr, "talon_generate: %s\n", err);
            goto done;
        }
        force = (int32_t *)malloc((size_t)(p.count * new_tokens) * 4);
        if (!force || forced.count != p.count) {
            fprintf(stderr, "talon_generate: %s: %lld lines for %lld prompts\n", force_file,
                    (long long)forced.count, (long long)p.count);
            goto done;
        }
        for (b = 0; b < p.count; b++) {
            if (forced.lens[b] < new_tokens - 1) {
                fprintf(stderr, "talon_generate: %s: line %lld has %lld tokens, %lld needed\n",
                        force_file, (long long)b + 1, (long long)forced.lens[b], new_tokens - 1);
                goto done;
            }
            for (s = 0; s < new_tokens - 1; s++)
                force[s * p.count + b] = forced.tokens[forced.offsets[b] + s];
        }
    }

#define CK(call)                                                                               \
    do {                                                                                       \
        CUresult r_ = (call);                                                                  \
        if (r_ != CUDA_SUCCESS) {                                                              \
            const char *e_ = NULL;                                                             \
            cuGetErrorString(r_, &e_);                                                         \
            fprintf(stderr, "talon_generate: %s: %s\n", #call, e_ ? e_ : "?");                 \
            goto done;                                                                         \
        }                                                                                      \
    } while (0)
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&cu, dev));
    CK(cuCtxSetCurrent(cu));
    CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    memset(&topt, 0, sizeof topt);
    topt.flags = TALON_CTX_PRELOAD; /* the decode step is captured into a graph */
    if (talon_ctx_create(&ctx, &topt) != TALON_SUCCESS) {
        fprintf(stderr, "talon_generate: %s\n", talon_last_error());
        goto done;
    }
    memset(&o, 0, sizeof o);
    o.max_batch = p.count;
    o.max_seq = max_seq ? max_seq : max_len + new_tokens + (profile ? 1 : 0);
    o.max_prefill = p.total;
    o.layers = layers;
    o.all_logits = all_logits;
    o.fp8 = fp8;
    o.top_k = top_k;
    o.temperature = (float)temperature;
    o.seed = seed;
    m = llm_load(model, &o, ctx, stream, err, sizeof err);
    if (!m) {
        fprintf(stderr, "talon_generate: %s\n", err);
        goto done;
    }
    rows = all_logits ? p.total : p.count;
    first = (int32_t *)malloc((size_t)p.count * 4);
    steps = (int32_t *)malloc((size_t)(p.count * new_tokens) * 4);
    if (logits_out) logits = (float *)malloc((size_t)(rows * llm_config(m)->vocab_size) * 4);
    if (step_logits_out)
        step_logits = (float *)malloc((size_t)((new_tokens - 1) * p.count *
                                               llm_config(m)->vocab_size) * 4 + 4);
    if (!first || !steps || (logits_out && !logits) || (step_logits_out && !step_logits)) {
        fprintf(stderr, "talon_generate: out of host memory\n");
        goto done;
    }
    for (r = 0; r < runs; r++) { /* the same prompts each time; the best time is reported */
        double fwd = 0, step = 0;
        t0 = now_ms();
        if (llm_prefill(m, p.count, p.tokens, p.offsets, p.lens, all_logits, logits, first,
                        &fwd, err, sizeof err)) {
            fprintf(stderr, "talon_generate: %s\n", err);
            goto done;
        }
        wall_ms = now_ms() - t0;
        if (new_tokens > 1 &&
            llm_decode(m, new_tokens - 1, force, steps, step_logits, &step, err, sizeof err)) {
            fprintf(stderr, "talon_generate: %s\n", err);
            goto done;
        }
        if (!r || fwd < prefill_ms) prefill_ms = fwd;
        if (!r || step < step_ms) step_ms = step;
    }
    printf("talon_generate: %lld prompts, %lld prompt tokens, %lld layers (hidden %lld, rope "
           "theta %g): prefill %.2f ms on the GPU (%.0f tokens/s; %.2f ms with the host's "
           "copies), %lld decode steps at %.3f ms/step\n",
           (long long)p.count, (long long)p.total,
           (long long)(layers ? layers : llm_config(m)->num_hidden_layers),
           (long long)llm_config(m)->hidden_size, llm_config(m)->rope_theta, prefill_ms,
           (double)p.total / prefill_ms * 1e3, wall_ms, new_tokens - 1, step_ms);
    if (profile) {
        llm_stage_time st[64];
        int n, i;
        double step_us;
        if (llm_profile_decode(m, 20, st, 64, &n, &step_us, err, sizeof err)) {
            fprintf(stderr, "talon_generate: %s\n", err);
            goto done;
        }
        printf("decode step by stage (a graph with an event between stages: %.1f us):\n",
               step_us);
        for (i = 0; i < n; i++)
            printf("  %-26s %9.1f us %5.1f%%  (x%d)\n", st[i].name, st[i].us,
                   100.0 * st[i].us / step_us, st[i].count);
    }
    if (tokens_out) {
        FILE *f = fopen(tokens_out, "w");
        if (!f) {
            fprintf(stderr, "talon_generate: cannot write %s\n", tokens_out);
            goto done;
        }
        for (b = 0; b < p.count; b++) {
            fprintf(f, "%d", first[b]);
            for (s = 0; s < new_tokens - 1; s++) fprintf(f, " %d", steps[s * p.count + b]);
            fprintf(f, "\n");
        }
        if (fclose(f)) {
            fprintf(stderr, "talon_generate: cannot write %s\n", tokens_out);
            goto done;
        }
    }
    if (logits_out) {
        FILE *f = fopen(logits_out, "wb");
        const size_t n = (size_t)(rows * llm_config(m)->vocab_size);
        const int wrote = f && fwrite(logits, 4, n, f) == n;
        if (!f || fclose(f) || !wrote) {
            fprintf(stderr, "talon_generate: cannot write %s\n", logits_out);
            goto done;
        }
    }
    if (step_logits_out) {
        FILE *f = fopen(step_logits_out, "wb");
        const size_t n = (size_t)((new_tokens - 1) * p.count * llm_config(m)->vocab_size);
        const int wrote = f && fwrite(step_logits, 4, n, f) == n;
        if (!f || fclose(f) || !wrote) {
            fprintf(stderr, "talon_generate: cannot write %s\n", step_logits_out);
            goto done;
        }
    }
    status = 0;
done:
    llm_free(m);
    talon_ctx_destroy(ctx);
    if (stream) cuStreamDestroy(stream);
    if (cu) cuDevicePrimaryCtxRelease(dev);
    free(p.tokens); free(p.offsets); free(p.lens); free(logits); free(first); free(steps);
    free(forced.tokens); free(forced.offsets); free(forced.lens); free(force); free(step_logits);
    return status;
}
