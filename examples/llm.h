/* llm.h - a decoder-only transformer on talon alone, Llama-style or Qwen3-MoE-style: weights
   from a Hugging Face directory (config.json + safetensors, bf16), a batch of prompts
   prefilled at once (ragged), then decode steps (greedy, or top-k sampling), each a replay of
   one CUDA graph.
   Needs a current CUcontext. */
#ifndef TALON_EXAMPLES_LLM_H
#define TALON_EXAMPLES_LLM_H
#include <stddef.h>
#include <stdint.h>
#include <cuda.h>
#include "talon.h"
#include "model_config.h"

typedef struct llm_options {
    int64_t max_batch;     /* sequences decoded together */
    int64_t max_seq;       /* prompt + generated tokens of one sequence */
    int64_t max_prefill;   /* prompt tokens of one prefill call, all sequences together */
    int64_t layers;        /* 0: the config's num_hidden_layers; else the first `layers` */
    int all_logits;        /* llm_prefill may return every position's logits (more memory) */
    int64_t top_k;         /* 0 or 1: greedy (on the GPU); else sample from the top_k logits
                              (talon_topk on the GPU, the draw on the host, sample.h) */
    float temperature;     /* top_k > 1: > 0 */
    uint64_t seed;         /* top_k > 1: the sampler's seed */
    int fp8;               /* Llama-style only: the projections' weights quantised at load to
                              e4m3 with a scale per 128 x 128 block, their inputs per token and
                              128 columns (DeepSeek-V3's scheme); embedding, norms, attention
                              and the LM head stay bf16 */
} llm_options;

typedef struct llm llm;

/* Loads config and weights (bf16) onto the device, allocates the KV cache and buffers.
   Architectures: model_type "llama" and "qwen3_moe" (model_config.h).
   Returns NULL with a message in err. */
llm *llm_load(const char *model_dir, const llm_options *opt, talon_ctx *ctx, CUstream stream,
              char *err, size_t err_len);
void llm_free(llm *m);
const model_config *llm_config(const llm *m);

/* Prefills `batch` prompts (sequence b: lens[b] tokens at tokens + offsets[b]) into fresh
   sequences 0..batch-1 and picks each one's first generated token (greedy or sampled, as the
   options say) into next[b].
   logits (optional, host fp32): the last position's logits of each prompt, [batch, vocab], or
   with all_positions (needs llm_options.all_logits) every position's, [sum of lens, vocab].
   forward_ms (optional): the GPU time of the forward pass, from the embedding lookup to the
   greedy tokens (CUDA events; the uploads of the token ids before and the copies after are
   outside). Returns 0, or -1 with a message. */
int llm_prefill(llm *m, int64_t batch, const int32_t *tokens, const int64_t *offsets,
                const int64_t *lens, int all_positions, float *logits, int32_t *next,
                double *forward_ms, char *err, size_t err_len);

/* Runs `steps` decode steps for the sequences of the last prefill, starting from the tokens it
   returned: out [steps, batch] gets each step's token (greedy, or sampled: then every step
   waits for its candidates, the host draws, and the next replay reads the draws). The first
   call captures the step into a CUDA graph; each step replays it. Optional (0/NULL to leave out):
     force [steps, batch]: the token each step feeds instead of the previous step's choice
       (teacher forcing: step s processes force[s]), for checking the logits of a given path;
     logits [steps, batch, vocab] (host fp32): each step's logits (a copy after every step);
     step_ms: the mean time of a step (CUDA events around the replays).
   Returns 0, or -1 with a message. */
int llm_decode(llm *m, int64_t steps, const int32_t *force, int32_t *out, float *logits,
               double *step_ms, char *err, size_t err_len);

/* The time of each stage of a decode step (norms, projections, attention, MLP or MoE stages,
   LM head, ...), summed over the layers. */
typedef struct llm_stage_time {
    const char *name;
    double us;                  /* mean GPU time per step */
    int count;                  /* occurrences per step (one per layer for a layer's stage) */
} llm_stage_time;

/* Profiles the decode step of the current batch: captures it with an event before each stage
   into a graph of its own, replays that `reps` times at the sequences' next position (the
   same cache slot is rewritten; the sequences do not advance) and returns the stages in order
   of first appearance (at most max; *count of them) and *step_us, the whole step. The events
   between kernels make that graph a little slower than the plain step. Returns 0, or -1 with
   a message. */
int llm_profile_decode(llm *m, int reps, llm_stage_time *out, int max, int *count,
                       double *step_us, char *err, size_t err_len);

#endif
