/* Hugging Face config.json for the two architectures the example program runs: Llama
   ("model_type": "llama") and Qwen3-MoE ("qwen3_moe"). Every field is checked (type, range,
   the relations between them); an error names the field and its value, e.g.
   "config.json: num_key_value_heads = 5 does not divide num_attention_heads = 32".
   Sizes, counts and layer indices are limited to [1, 2^31 - 1] (0 where zero is allowed),
   so products of a few of them fit int64.
   C99 + POSIX, also compiles as C++17. */
#ifndef TALON_EXAMPLES_MODEL_CONFIG_H
#define TALON_EXAMPLES_MODEL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MODEL_MAX_MLP_ONLY_LAYERS 256

typedef enum model_arch { MODEL_LLAMA, MODEL_QWEN3_MOE } model_arch;
enum { ROPE_SCALING_NONE = 0, ROPE_SCALING_LLAMA3 = 1 };

typedef struct model_config {
    model_arch arch; /* from "model_type": "llama" or "qwen3_moe" (others: an error naming it) */
    int64_t hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
        num_key_value_heads;
    int64_t head_dim; /* absent or null: hidden_size / num_attention_heads (which must divide) */
    int64_t vocab_size, max_position_embeddings;
    double rms_norm_eps, rope_theta; /* rope_theta: 10000 if absent */
    int tie_word_embeddings;         /* default 0 */
    int attention_bias;              /* default 0; parsed, the model decides */
    /* rope_scaling: null/absent/"default" -> ROPE_SCALING_NONE; {"rope_type" (or "type"):
       "llama3", "factor", "low_freq_factor", "high_freq_factor",
       "original_max_position_embeddings"} -> ROPE_SCALING_LLAMA3; any other type: an error
       naming it. Newer transformers' "rope_parameters" (rope_type, rope_theta and the factors
       in one object) is read the same way when rope_scaling is absent or null. */
    int rope_scaling;
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor; /* 0 without llama3 */
    int64_t rope_original_max_pos;
    char torch_dtype[16]; /* "bfloat16" etc., "" if absent ("dtype" is read too) */
    /* qwen3_moe only (0 for llama): */
    int64_t num_experts, num_experts_per_tok, moe_intermediate_size, decoder_sparse_step;
    int norm_topk_prob;
    int64_t num_mlp_only_layers;
    int64_t mlp_only_layers[MODEL_MAX_MLP_ONLY_LAYERS]; /* layer indices, as listed */
} model_config;

/* Parses a config.json text (len bytes, need not be NUL-terminated) into *c (cleared first).
   Required: model_type, hidden_size, intermediate_size, num_hidden_layers,
   num_attention_heads, vocab_size, max_position_embeddings, rms_norm_eps; for qwen3_moe also
   num_experts, num_experts_per_tok, moe_intermediate_size. Optional: num_key_value_heads
   (= num_attention_heads), head_dim, rope_theta, rope_scaling, tie_word_embeddings,
   attention_bias, torch_dtype/dtype; qwen3_moe: decoder_sparse_step (1), norm_topk_prob
   (false), mlp_only_layers ([]); null counts as absent for the optional ones. Other members
   are ignored. Checks: positive sizes, num_key_value_heads divides num_attention_heads,
   head_dim even, rms_norm_eps > 0, rope_theta > 0, llama3 factors > 0 with
   high_freq_factor > low_freq_factor, moe: 1 <= num_experts_per_tok <= num_experts,
   decoder_sparse_step >= 1, mlp_only_layers entries in [0, num_hidden_layers).
   0 ok, -1 error (message in err). */
int model_config_parse(model_config *c, const char *text, size_t len, char *err, size_t err_len);
/* Reads `path` (config.json, or a directory containing it; at most 16 MB) and parses it. */
int model_config_load(model_config *c, const char *path, char *err, size_t err_len);
/* 1 if layer i uses the MoE MLP (qwen3_moe: i in [0, num_hidden_layers), not in
   mlp_only_layers, num_experts > 0 and (i + 1) % decoder_sparse_step == 0), else 0. */
int model_config_layer_is_moe(const model_config *c, int64_t layer);

#ifdef __cplusplus
}
#endif

#endif
