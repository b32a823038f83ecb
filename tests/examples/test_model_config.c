/* examples/model_config.c: real Llama 3 / 3.1 / 3.2 and Qwen3-30B-A3B config.json files parse
   to their values; defaults (num_key_value_heads, head_dim, rope_theta, booleans, null for an
   optional field); llama3 rope scaling and the newer rope_parameters; every error names the
   field and the value (each required field removed, wrong types, ranges, indivisible heads,
   unknown model_type or rope type, bad MoE fields); which layers are MoE; loading from a
   file or a directory. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../examples/model_config.h"

static char err[1024];

#define assert_contains(s, sub)                                                                    \
    do {                                                                                           \
        if (!strstr((s), (sub))) fail_msg("\"%s\" not in message \"%s\"", (sub), (s));             \
    } while (0)

/* ---------------------------------------------------------------- real configs */
/* meta-llama/Meta-Llama-3-8B */
static const char LLAMA3_8B[] = "{\n"
                                "  \"architectures\": [\n"
                                "    \"LlamaForCausalLM\"\n"
                                "  ],\n"
                                "  \"attention_bias\": false,\n"
                                "  \"attention_dropout\": 0.0,\n"
                                "  \"bos_token_id\": 128000,\n"
                                "  \"eos_token_id\": 128001,\n"
                                "  \"hidden_act\": \"silu\",\n"
                                "  \"hidden_size\": 4096,\n"
                                "  \"initializer_range\": 0.02,\n"
                                "  \"intermediate_size\": 14336,\n"
                                "  \"max_position_embeddings\": 8192,\n"
                                "  \"model_type\": \"llama\",\n"
                                "  \"num_attention_heads\": 32,\n"
                                "  \"num_hidden_layers\": 32,\n"
                                "  \"num_key_value_heads\": 8,\n"
                                "  \"pretraining_tp\": 1,\n"
                                "  \"rms_norm_eps\": 1e-05,\n"
                                "  \"rope_scaling\": null,\n"
                                "  \"rope_theta\": 500000.0,\n"
                                "  \"tie_word_embeddings\": false,\n"
                                "  \"torch_dtype\": \"bfloat16\",\n"
                                "  \"transformers_version\": \"4.40.0.dev0\",\n"
                                "  \"use_cache\": true,\n"
                                "  \"vocab_size\": 128256\n"
                                "}\n";

/* meta-llama/Llama-3.1-8B-Instruct */
static const char LLAMA31_8B[] = "{\n"
                                 "  \"architectures\": [\n"
                                 "    \"LlamaForCausalLM\"\n"
                                 "  ],\n"
                                 "  \"attention_bias\": false,\n"
                                 "  \"attention_dropout\": 0.0,\n"
                                 "  \"bos_token_id\": 128000,\n"
                                 "  \"eos_token_id\": [\n"
                                 "    128001,\n"
                                 "    128008,\n"
                                 "    128009\n"
                                 "  ],\n"
                                 "  \"hidden_act\": \"silu\",\n"
                                 "  \"hidden_size\": 4096,\n"
                                 "  \"initializer_range\": 0.02,\n"
                                 "  \"intermediate_size\": 14336,\n"
                                 "  \"max_position_embeddings\": 131072,\n"
                                 "  \"mlp_bias\": false,\n"
                                 "  \"model_type\": \"llama\",\n"
                                 "  \"num_attention_heads\": 32,\n"
                                 "  \"num_hidden_layers\": 32,\n"
                                 "  \"num_key_value_heads\": 8,\n"
                                 "  \"pretraining_tp\": 1,\n"
                                 "  \"rms_norm_eps\": 1e-05,\n"
                                 "  \"rope_scaling\": {\n"
                                 "    \"factor\": 8.0,\n"
                                 "    \"low_freq_factor\": 1.0,\n"
                                 "    \"high_freq_factor\": 4.0,\n"
                                 "    \"original_max_position_embeddings\": 8192,\n"
                                 "    \"rope_type\": \"llama3\"\n"
                                 "  },\n"
                                 "  \"rope_theta\": 500000.0,\n"
                                 "  \"tie_word_embeddings\": false,\n"
                                 "  \"torch_dtype\": \"bfloat16\",\n"
                                 "  \"transformers_version\": \"4.42.3\",\n"
                                 "  \"use_cache\": true,\n"
                                 "  \"vocab_size\": 128256\n"
                                 "}\n";

/* meta-llama/Llama-3.2-1B */
static const char LLAMA32_1B[] = "{\n"
                                 "  \"architectures\": [\n"
                                 "    \"LlamaForCausalLM\"\n"
                                 "  ],\n"
                                 "  \"attention_bias\": false,\n"
                                 "  \"attention_dropout\": 0.0,\n"
                                 "  \"bos_token_id\": 128000,\n"
                                 "  \"eos_token_id\": 128001,\n"
                                 "  \"head_dim\": 64,\n"
                                 "  \"hidden_act\": \"silu\",\n"
                                 "  \"hidden_size\": 2048,\n"
                                 "  \"initializer_range\": 0.02,\n"
                                 "  \"intermediate_size\": 8192,\n"
                                 "  \"max_position_embeddings\": 131072,\n"
                                 "  \"mlp_bias\": false,\n"
                                 "  \"model_type\": \"llama\",\n"
                                 "  \"num_attention_heads\": 32,\n"
                                 "  \"num_hidden_layers\": 16,\n"
                                 "  \"num_key_value_heads\": 8,\n"
                                 "  \"pretraining_tp\": 1,\n"
                                 "  \"rms_norm_eps\": 1e-05,\n"
                                 "  \"rope_scaling\": {\n"
                                 "    \"factor\": 32.0,\n"
                                 "    \"high_freq_factor\": 4.0,\n"
                                 "    \"low_freq_factor\": 1.0,\n"
                                 "    \"original_max_position_embeddings\": 8192,\n"
                                 "    \"rope_type\": \"llama3\"\n"
                                 "  },\n"
                                 "  \"rope_theta\": 500000.0,\n"
                                 "  \"tie_word_embeddings\": true,\n"
                                 "  \"torch_dtype\": \"bfloat16\",\n"
                                 "  \"transformers_version\": \"4.45.0.dev0\",\n"
                                 "  \"use_cache\": true,\n"
                                 "  \"vocab_size\": 128256\n"
                                 "}\n";

/* Qwen/Qwen3-30B-A3B */
static const char QWEN3_30B_A3B[] = "{\n"
                                    "  \"architectures\": [\n"
                                    "    \"Qwen3MoeForCausalLM\"\n"
                                    "  ],\n"
                                    "  \"attention_bias\": false,\n"
                                    "  \"attention_dropout\": 0.0,\n"
                                    "  \"bos_token_id\": 151643,\n"
                                    "  \"decoder_sparse_step\": 1,\n"
                                    "  \"eos_token_id\": 151645,\n"
                                    "  \"head_dim\": 128,\n"
                                    "  \"hidden_act\": \"silu\",\n"
                                    "  \"hidden_size\": 2048,\n"
                                    "  \"initializer_range\": 0.02,\n"
                                    "  \"intermediate_size\": 6144,\n"
                                    "  \"max_position_embeddings\": 40960,\n"
                                    "  \"max_window_layers\": 48,\n"
                                    "  \"mlp_only_layers\": [],\n"
                                    "  \"model_type\": \"qwen3_moe\",\n"
                                    "  \"moe_intermediate_size\": 768,\n"
                                    "  \"norm_topk_prob\": true,\n"
                                    "  \"num_attention_heads\": 32,\n"
                                    "  \"num_experts\": 128,\n"
                                    "  \"num_experts_per_tok\": 8,\n"
                                    "  \"num_hidden_layers\": 48,\n"
                                    "  \"num_key_value_heads\": 4,\n"
                                    "  \"output_router_logits\": false,\n"
                                    "  \"rms_norm_eps\": 1e-06,\n"
                                    "  \"rope_scaling\": null,\n"
                                    "  \"rope_theta\": 1000000.0,\n"
                                    "  \"router_aux_loss_coef\": 0.001,\n"
                                    "  \"sliding_window\": null,\n"
                                    "  \"tie_word_embeddings\": false,\n"
                                    "  \"torch_dtype\": \"bfloat16\",\n"
                                    "  \"transformers_version\": \"4.51.0\",\n"
                                    "  \"use_cache\": true,\n"
                                    "  \"use_sliding_window\": false,\n"
                                    "  \"vocab_size\": 151936\n"
                                    "}\n";

static void parse_ok(model_config *c, const char *text) {
    memset(err, 'x', sizeof err - 1);
    err[sizeof err - 1] = 0;
    if (model_config_parse(c, text, strlen(text), err, sizeof err) != 0) fail_msg("%s", err);
    assert_string_equal(err, "");
}

static void test_llama3_8b(void **state) {
    model_config c;
    int64_t i;
    (void)state;
    parse_ok(&c, LLAMA3_8B);
    assert_int_equal(c.arch, MODEL_LLAMA);
    assert_int_equal(c.hidden_size, 4096);
    assert_int_equal(c.intermediate_size, 14336);
    assert_int_equal(c.num_hidden_layers, 32);
    assert_int_equal(c.num_attention_heads, 32);
    assert_int_equal(c.num_key_value_heads, 8);
    assert_int_equal(c.head_dim, 128);
    assert_int_equal(c.vocab_size, 128256);
    assert_int_equal(c.max_position_embeddings, 8192);
    assert_true(c.rms_norm_eps == 1e-5);
    assert_true(c.rope_theta == 500000.0);
    assert_int_equal(c.tie_word_embeddings, 0);
    assert_int_equal(c.attention_bias, 0);
    assert_int_equal(c.rope_scaling, ROPE_SCALING_NONE);
    assert_true(c.rope_factor == 0 && c.rope_low_freq_factor == 0 && c.rope_high_freq_factor == 0);
    assert_int_equal(c.rope_original_max_pos, 0);
    assert_string_equal(c.torch_dtype, "bfloat16");
    assert_int_equal(c.num_experts, 0);
    assert_int_equal(c.num_experts_per_tok, 0);
    assert_int_equal(c.moe_intermediate_size, 0);
    assert_int_equal(c.decoder_sparse_step, 0);
    assert_int_equal(c.norm_topk_prob, 0);
    assert_int_equal(c.num_mlp_only_layers, 0);
    for (i = -1; i <= 32; i++) assert_int_equal(model_config_layer_is_moe(&c, i), 0);
}

static void test_llama31_8b(void **state) {
    model_config c;
    (void)state;
    parse_ok(&c, LLAMA31_8B);
    assert_int_equal(c.arch, MODEL_LLAMA);
    assert_int_equal(c.max_position_embeddings, 131072);
    assert_int_equal(c.head_dim, 128);
    assert_int_equal(c.rope_scaling, ROPE_SCALING_LLAMA3);
    assert_true(c.rope_factor == 8.0);
    assert_true(c.rope_low_freq_factor == 1.0);
    assert_true(c.rope_high_freq_factor == 4.0);
    assert_int_equal(c.rope_original_max_pos, 8192);
    assert_true(c.rope_theta == 500000.0);
}

static void test_llama32_1b(void **state) {
    model_config c;
    (void)state;
    parse_ok(&c, LLAMA32_1B);
    assert_int_equal(c.hidden_size, 2048);
    assert_int_equal(c.intermediate_size, 8192);
    assert_int_equal(c.num_hidden_layers, 16);
    assert_int_equal(c.num_key_value_heads, 8);
    assert_int_equal(c.head_dim, 64);
    assert_int_equal(c.tie_word_embeddings, 1);
    assert_int_equal(c.rope_scaling, ROPE_SCALING_LLAMA3);
    assert_true(c.rope_factor == 32.0);
}

static void test_qwen3_30b_a3b(void **state) {
    model_config c;
    int64_t i;
    (void)state;
    parse_ok(&c, QWEN3_30B_A3B);
    assert_int_equal(c.arch, MODEL_QWEN3_MOE);
    assert_int_equal(c.hidden_size, 2048);
    assert_int_equal(c.intermediate_size, 6144);
    assert_int_equal(c.num_hidden_layers, 48);
    assert_int_equal(c.num_attention_heads, 32);
    assert_int_equal(c.num_key_value_heads, 4);
    assert_int_equal(c.head_dim, 128); /* given: not hidden_size / heads = 64 */
    assert_int_equal(c.vocab_size, 151936);
    assert_int_equal(c.max_position_embeddings, 40960);
    assert_true(c.rms_norm_eps == 1e-6);
    assert_true(c.rope_theta == 1000000.0);
    assert_int_equal(c.rope_scaling, ROPE_SCALING_NONE);
    assert_int_equal(c.tie_word_embeddings, 0);
    assert_string_equal(c.torch_dtype, "bfloat16");
    assert_int_equal(c.num_experts, 128);
    assert_int_equal(c.num_experts_per_tok, 8);
    assert_int_equal(c.moe_intermediate_size, 768);
    assert_int_equal(c.decoder_sparse_step, 1);
    assert_int_equal(c.norm_topk_prob, 1);
    assert_int_equal(c.num_mlp_only_layers, 0);
    for (i = 0; i < 48; i++) assert_int_equal(model_config_layer_is_moe(&c, i), 1);
    assert_int_equal(model_config_layer_is_moe(&c, 48), 0);
    assert_int_equal(model_config_layer_is_moe(&c, -1), 0);
    assert_int_equal(model_config_layer_is_moe(NULL, 0), 0);
}

/* ---------------------------------------------------------------- editing a config */
/* A copy of base with the member `key` set to the JSON text `value`, or removed when value is
   NULL; a key base lacks is added first. Works on the one-member-per-line texts above. */
static char *edit(const char *base, const char *key, const char *value) {
    size_t n = strlen(base), cap = n + (value ? strlen(value) : 0) + strlen(key) + 16;
    char *out = (char *)malloc(cap), pat[96];
    const char *hit, *v, *eol, *val_end;
    snprintf(pat, sizeof pat, "\n  \"%s\": ", key);
    hit = strstr(base, pat);
    if (!hit) {
        if (!value) fail_msg("edit: no %s to remove", key);
        snprintf(out, cap, "{\n  \"%s\": %s,%s", key, value, strchr(base, '{') + 1);
        return out;
    }
    v = hit + strlen(pat);
    if ((*v == '{' || *v == '[') && v[1] == '\n') /* a value over several lines, closed at "  }" */
        eol = strchr(strstr(v, *v == '{' ? "\n  }" : "\n  ]") + 1, '\n');
    else eol = strchr(v, '\n');
    val_end = eol;
    if (val_end[-1] == ',') val_end--;
    if (value) {
        snprintf(out, cap, "%.*s%s%s", (int)(v - base), base, value, val_end);
    } else if (*val_end == ',') {
        snprintf(out, cap, "%.*s%s", (int)(hit - base), base, eol);
    } else { /* the last member: drop the comma before it */
        const char *comma = hit;
        while (*comma != ',') comma--;
        snprintf(out, cap, "%.*s%s", (int)(comma - base), base, eol);
    }
    return out;
}

static void test_edit_helper(void **state) {
    char *a = edit("{\n  \"a\": 1,\n  \"b\": 2\n}", "b", NULL),
         *b = edit("{\n  \"a\": 1,\n  \"b\": 2\n}", "a", "[3]"),
         *c = edit("{\n  \"a\": 1\n}", "z", "true"), *d = edit(LLAMA31_8B, "rope_scaling", "null"),
         *e = edit(LLAMA31_8B, "rope_scaling", NULL), *f = edit(LLAMA3_8B, "architectures", NULL);
    (void)state;
    assert_string_equal(a, "{\n  \"a\": 1\n}");
    assert_string_equal(b, "{\n  \"a\": [3],\n  \"b\": 2\n}");
    assert_string_equal(c, "{\n  \"z\": true,\n  \"a\": 1\n}");
    assert_non_null(strstr(d, "\"rope_scaling\": null,\n  \"rope_theta\""));
    assert_null(strstr(d, "factor"));
    assert_null(strstr(e, "rope_scaling"));
    assert_null(strstr(e, "factor"));
    assert_null(strstr(f, "LlamaForCausalLM"));
    free(a), free(b), free(c), free(d), free(e), free(f);
}

/* ---------------------------------------------------------------- valid variations */
typedef struct ok_row {
    const char *name, *base, *key, *value; /* value NULL: the key removed */
    const char *key2, *value2;             /* a second edit, or NULL */
    int64_t heads, kv_heads, head_dim;
    double theta;
    int rope, tie, bias;
    const char *dtype;
} ok_row;

static const ok_row ok_rows[] = {
    {"num_key_value_heads absent: = num_attention_heads", LLAMA3_8B, "num_key_value_heads", NULL,
     NULL, NULL, 32, 32, 128, 500000, 0, 0, 0, "bfloat16"},
    {"num_key_value_heads null", LLAMA3_8B, "num_key_value_heads", "null", NULL, NULL, 32, 32, 128,
     500000, 0, 0, 0, "bfloat16"},
    {"head_dim null: hidden_size / heads", LLAMA3_8B, "head_dim", "null", NULL, NULL, 32, 8, 128,
     500000, 0, 0, 0, "bfloat16"},
    {"head_dim given", LLAMA3_8B, "head_dim", "96", NULL, NULL, 32, 8, 96, 500000, 0, 0, 0,
     "bfloat16"},
    {"head_dim 2.0 is an integer", LLAMA3_8B, "head_dim", "2.0", NULL, NULL, 32, 8, 2, 500000, 0, 0,
     0, "bfloat16"},
    {"rope_theta absent: 10000", LLAMA3_8B, "rope_theta", NULL, NULL, NULL, 32, 8, 128, 10000, 0, 0,
     0, "bfloat16"},
    {"rope_theta null: 10000", LLAMA3_8B, "rope_theta", "null", NULL, NULL, 32, 8, 128, 10000, 0, 0,
     0, "bfloat16"},
    {"rope_theta an integer", LLAMA3_8B, "rope_theta", "250000", NULL, NULL, 32, 8, 128, 250000, 0,
     0, 0, "bfloat16"},
    {"rope_scaling absent", LLAMA31_8B, "rope_scaling", NULL, NULL, NULL, 32, 8, 128, 500000, 0, 0,
     0, "bfloat16"},
    {"rope_scaling default", LLAMA31_8B, "rope_scaling", "{\"rope_type\": \"default\"}", NULL, NULL,
     32, 8, 128, 500000, 0, 0, 0, "bfloat16"},
    {"rope_scaling with \"type\"", LLAMA31_8B, "rope_scaling",
     "{\"type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1, \"high_freq_factor\": 4, "
     "\"original_max_position_embeddings\": 8192}",
     NULL, NULL, 32, 8, 128, 500000, 1, 0, 0, "bfloat16"},
    {"rope_parameters (transformers 5)", LLAMA3_8B, "rope_parameters",
     "{\"rope_type\": \"llama3\", \"rope_theta\": 250000.0, \"factor\": 8.0, \"low_freq_factor\": "
     "1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}",
     "rope_theta", NULL, 32, 8, 128, 250000, 1, 0, 0, "bfloat16"},
    {"rope_parameters default", LLAMA3_8B, "rope_parameters",
     "{\"rope_type\": \"default\", \"rope_theta\": 1000.0}", "rope_theta", NULL, 32, 8, 128, 1000,
     0, 0, 0, "bfloat16"},
    {"rope_theta at the top wins", LLAMA3_8B, "rope_parameters",
     "{\"rope_type\": \"default\", \"rope_theta\": 1000.0}", NULL, NULL, 32, 8, 128, 500000, 0, 0,
     0, "bfloat16"},
    {"tie_word_embeddings absent", LLAMA3_8B, "tie_word_embeddings", NULL, NULL, NULL, 32, 8, 128,
     500000, 0, 0, 0, "bfloat16"},
    {"tie_word_embeddings true", LLAMA3_8B, "tie_word_embeddings", "true", NULL, NULL, 32, 8, 128,
     500000, 0, 1, 0, "bfloat16"},
    {"attention_bias true", LLAMA3_8B, "attention_bias", "true", NULL, NULL, 32, 8, 128, 500000, 0,
     0, 1, "bfloat16"},
    {"torch_dtype absent", LLAMA3_8B, "torch_dtype", NULL, NULL, NULL, 32, 8, 128, 500000, 0, 0, 0,
     ""},
    {"torch_dtype null", LLAMA3_8B, "torch_dtype", "null", NULL, NULL, 32, 8, 128, 500000, 0, 0, 0,
     ""},
    {"dtype (newer transformers)", LLAMA3_8B, "torch_dtype", NULL, "dtype", "\"float16\"", 32, 8,
     128, 500000, 0, 0, 0, "float16"},
    {"torch_dtype of 15 bytes", LLAMA3_8B, "torch_dtype", "\"float8_e4m3fnuz\"", NULL, NULL, 32, 8,
     128, 500000, 0, 0, 0, "float8_e4m3fnuz"},
    {"multi-query attention", LLAMA3_8B, "num_key_value_heads", "1", NULL, NULL, 32, 1, 128, 500000,
     0, 0, 0, "bfloat16"},
};

static void test_ok(void **state) {
    const ok_row *r = (const ok_row *)*state;
    char *t1 = edit(r->base, r->key, r->value), *t2 = r->key2 ? edit(t1, r->key2, r->value2) : NULL;
    model_config c;
    parse_ok(&c, t2 ? t2 : t1);
    assert_int_equal(c.num_attention_heads, r->heads);
    assert_int_equal(c.num_key_value_heads, r->kv_heads);
    assert_int_equal(c.head_dim, r->head_dim);
    if (c.rope_theta != r->theta)
        fail_msg("rope_theta %.17g, expected %.17g", c.rope_theta, r->theta);
    assert_int_equal(c.rope_scaling, r->rope);
    if (r->rope) {
        assert_true(c.rope_factor == 8.0 && c.rope_low_freq_factor == 1.0 &&
                    c.rope_high_freq_factor == 4.0);
        assert_int_equal(c.rope_original_max_pos, 8192);
    }
    assert_int_equal(c.tie_word_embeddings, r->tie);
    assert_int_equal(c.attention_bias, r->bias);
    assert_string_equal(c.torch_dtype, r->dtype);
    free(t1);
    free(t2);
}

/* ---------------------------------------------------------------- errors */
typedef struct err_row {
    const char *name, *base, *key, *value; /* value NULL: the key removed */
    const char *msg;
} err_row;

#define L LLAMA3_8B
#define Q QWEN3_30B_A3B
#define R LLAMA31_8B
#define LLAMA3_ROPE(f, lo, hi, orig)                                                               \
    "{\"rope_type\": \"llama3\", \"factor\": " f ", \"low_freq_factor\": " lo                      \
    ", \"high_freq_factor\": " hi ", \"original_max_position_embeddings\": " orig "}"

static const err_row err_rows[] = {
    /* required fields */
    {"missing model_type", L, "model_type", NULL, "config.json: missing model_type"},
    {"missing hidden_size", L, "hidden_size", NULL, "config.json: missing hidden_size"},
    {"missing intermediate_size", L, "intermediate_size", NULL,
     "config.json: missing intermediate_size"},
    {"missing num_hidden_layers", L, "num_hidden_layers", NULL,
     "config.json: missing num_hidden_layers"},
    {"missing num_attention_heads", L, "num_attention_heads", NULL,
     "config.json: missing num_attention_heads"},
    {"missing vocab_size", L, "vocab_size", NULL, "config.json: missing vocab_size"},
    {"missing max_position_embeddings", L, "max_position_embeddings", NULL,
     "config.json: missing max_position_embeddings"},
    {"missing rms_norm_eps", L, "rms_norm_eps", NULL, "config.json: missing rms_norm_eps"},
    {"missing num_experts", Q, "num_experts", NULL, "config.json: missing num_experts"},
    {"missing num_experts_per_tok", Q, "num_experts_per_tok", NULL,
     "config.json: missing num_experts_per_tok"},
    {"missing moe_intermediate_size", Q, "moe_intermediate_size", NULL,
     "config.json: missing moe_intermediate_size"},
    /* types */
    {"hidden_size a string", L, "hidden_size", "\"4096\"",
     "config.json: hidden_size = \"4096\" is not an integer"},
    {"hidden_size fractional", L, "hidden_size", "4096.5",
     "config.json: hidden_size = 4096.5 is not an integer"},
    {"num_hidden_layers a bool", L, "num_hidden_layers", "true",
     "config.json: num_hidden_layers = true is not an integer"},
    {"num_hidden_layers huge", L, "num_hidden_layers", "1e100",
     "config.json: num_hidden_layers = 1e+100 is not an integer"},
    {"vocab_size null", L, "vocab_size", "null",
     "config.json: vocab_size = null is not an integer"},
    {"intermediate_size an array", L, "intermediate_size", "[14336]",
     "config.json: intermediate_size = an array is not an integer"},
    {"num_key_value_heads an object", L, "num_key_value_heads", "{}",
     "config.json: num_key_value_heads = an object is not an integer"},
    {"head_dim a string", L, "head_dim", "\"128\"",
     "config.json: head_dim = \"128\" is not an integer"},
    {"rms_norm_eps a string", L, "rms_norm_eps", "\"1e-5\"",
     "config.json: rms_norm_eps = \"1e-5\" is not a number"},
    {"rms_norm_eps null", L, "rms_norm_eps", "null",
     "config.json: rms_norm_eps = null is not a number"},
    {"rope_theta an array", L, "rope_theta", "[]",
     "config.json: rope_theta = an array is not a number"},
    {"tie_word_embeddings 1", L, "tie_word_embeddings", "1",
     "config.json: tie_word_embeddings = 1 is not true or false"},
    {"attention_bias a string", L, "attention_bias", "\"false\"",
     "config.json: attention_bias = \"false\" is not true or false"},
    {"torch_dtype a number", L, "torch_dtype", "16",
     "config.json: torch_dtype = 16 is not a dtype name"},
    {"torch_dtype too long", L, "torch_dtype", "\"bfloat16_but_longer\"",
     "config.json: torch_dtype = \"bfloat16_but_longer\" is not a dtype name"},
    /* ranges and relations */
    {"hidden_size 0", L, "hidden_size", "0",
     "config.json: hidden_size = 0 is out of range [1, 2147483647]"},
    {"hidden_size negative", L, "hidden_size", "-4096",
     "config.json: hidden_size = -4096 is out of range"},
    {"vocab_size 2^31", L, "vocab_size", "2147483648",
     "config.json: vocab_size = 2147483648 is out of range [1, 2147483647]"},
    {"num_attention_heads 0", L, "num_attention_heads", "0",
     "config.json: num_attention_heads = 0 is out of range"},
    {"num_key_value_heads 0", L, "num_key_value_heads", "0",
     "config.json: num_key_value_heads = 0 is out of range"},
    {"num_key_value_heads 5", L, "num_key_value_heads", "5",
     "config.json: num_key_value_heads = 5 does not divide num_attention_heads = 32"},
    {"num_key_value_heads 64", L, "num_key_value_heads", "64",
     "config.json: num_key_value_heads = 64 does not divide num_attention_heads = 32"},
    {"hidden_size not divisible by heads", L, "hidden_size", "4097",
     "config.json: head_dim is absent and num_attention_heads = 32 does not divide hidden_size = "
     "4097"},
    {"head_dim odd by default", L, "hidden_size", "4000", "config.json: head_dim = 125 is odd"},
    {"head_dim odd", Q, "head_dim", "127", "config.json: head_dim = 127 is odd"},
    {"head_dim 0", Q, "head_dim", "0", "config.json: head_dim = 0 is out of range"},
    {"rms_norm_eps 0", L, "rms_norm_eps", "0", "config.json: rms_norm_eps = 0 must be > 0"},
    {"rms_norm_eps negative", L, "rms_norm_eps", "-1e-05",
     "config.json: rms_norm_eps = -1e-05 must be > 0"},
    {"rope_theta 0", L, "rope_theta", "0.0", "config.json: rope_theta = 0 must be > 0"},
    {"rope_theta negative", L, "rope_theta", "-10000",
     "config.json: rope_theta = -10000 must be > 0"},
    /* model_type */
    {"model_type mistral", L, "model_type", "\"mistral\"",
     "config.json: model_type = \"mistral\" is not supported (expected \"llama\" or "
     "\"qwen3_moe\")"},
    {"model_type qwen3", Q, "model_type", "\"qwen3\"",
     "config.json: model_type = \"qwen3\" is not supported"},
    {"model_type Llama", L, "model_type", "\"Llama\"",
     "config.json: model_type = \"Llama\" is not supported"},
    {"model_type with a NUL", L, "model_type", "\"llama\\u0000\"", "is not supported"},
    {"model_type a number", L, "model_type", "5", "config.json: model_type = 5 is not supported"},
    {"model_type null", L, "model_type", "null", "config.json: model_type = null is not supported"},
    /* rope_scaling */
    {"rope_scaling yarn", R, "rope_scaling", "{\"rope_type\": \"yarn\", \"factor\": 4.0}",
     "config.json: rope_scaling type \"yarn\" is not supported (expected \"default\" or "
     "\"llama3\")"},
    {"rope_scaling linear", R, "rope_scaling", "{\"type\": \"linear\", \"factor\": 2.0}",
     "config.json: rope_scaling type \"linear\" is not supported"},
    {"rope_scaling dynamic", R, "rope_scaling", "{\"rope_type\": \"dynamic\", \"factor\": 2.0}",
     "rope_scaling type \"dynamic\" is not supported"},
    {"rope_scaling a string", R, "rope_scaling", "\"llama3\"",
     "config.json: rope_scaling = \"llama3\" is not an object or null"},
    {"rope_scaling without a type", R, "rope_scaling", "{\"factor\": 8.0}",
     "config.json: rope_scaling has no \"rope_type\""},
    {"rope_scaling type a number", R, "rope_scaling", "{\"rope_type\": 3}",
     "config.json: rope_scaling.rope_type = 3 is not a string"},
    {"llama3 without factor", R, "rope_scaling",
     "{\"rope_type\": \"llama3\", \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
     "\"original_max_position_embeddings\": 8192}",
     "config.json: missing rope_scaling.factor"},
    {"llama3 without original_max_position_embeddings", R, "rope_scaling",
     "{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": "
     "4.0}",
     "config.json: missing rope_scaling.original_max_position_embeddings"},
    {"llama3 factor 0", R, "rope_scaling", LLAMA3_ROPE("0", "1.0", "4.0", "8192"),
     "config.json: rope_scaling.factor = 0 must be > 0"},
    {"llama3 factor a string", R, "rope_scaling", LLAMA3_ROPE("\"8\"", "1.0", "4.0", "8192"),
     "config.json: rope_scaling.factor = \"8\" is not a number"},
    {"llama3 low_freq_factor negative", R, "rope_scaling", LLAMA3_ROPE("8.0", "-1", "4.0", "8192"),
     "config.json: rope_scaling.low_freq_factor = -1 must be > 0"},
    {"llama3 high <= low", R, "rope_scaling", LLAMA3_ROPE("8.0", "4.0", "1.0", "8192"),
     "config.json: rope_scaling.high_freq_factor = 1 must be > low_freq_factor = 4"},
    {"llama3 high == low", R, "rope_scaling", LLAMA3_ROPE("8.0", "2.0", "2.0", "8192"),
     "high_freq_factor = 2 must be > low_freq_factor = 2"},
    {"llama3 original max fractional", R, "rope_scaling",
     LLAMA3_ROPE("8.0", "1.0", "4.0", "8192.5"),
     "config.json: rope_scaling.original_max_position_embeddings = 8192.5 is not an integer"},
    {"llama3 original max 0", R, "rope_scaling", LLAMA3_ROPE("8.0", "1.0", "4.0", "0"),
     "config.json: rope_scaling.original_max_position_embeddings = 0 is out of range"},
    {"rope_parameters yarn", L, "rope_parameters", "{\"rope_type\": \"yarn\", \"rope_theta\": 1.0}",
     "config.json: rope_parameters type \"yarn\" is not supported"},
    {"rope_parameters theta 0", L, "rope_theta", NULL,
     NULL}, /* patched below: rope_parameters added */
    /* MoE */
    {"num_experts 0", Q, "num_experts", "0",
     "config.json: num_experts = 0 is out of range [1, 2147483647]"},
    {"num_experts_per_tok 0", Q, "num_experts_per_tok", "0",
     "config.json: num_experts_per_tok = 0 is out of range"},
    {"num_experts_per_tok > num_experts", Q, "num_experts_per_tok", "129",
     "config.json: num_experts_per_tok = 129 exceeds num_experts = 128"},
    {"moe_intermediate_size negative", Q, "moe_intermediate_size", "-768",
     "config.json: moe_intermediate_size = -768 is out of range"},
    {"decoder_sparse_step 0", Q, "decoder_sparse_step", "0",
     "config.json: decoder_sparse_step = 0 is out of range [1, 2147483647]"},
    {"decoder_sparse_step a string", Q, "decoder_sparse_step", "\"1\"",
     "config.json: decoder_sparse_step = \"1\" is not an integer"},
    {"norm_topk_prob a string", Q, "norm_topk_prob", "\"yes\"",
     "config.json: norm_topk_prob = \"yes\" is not true or false"},
    {"mlp_only_layers past the last layer", Q, "mlp_only_layers", "[0, 48]",
     "config.json: mlp_only_layers[1] = 48 is not a layer (num_hidden_layers = 48)"},
    {"mlp_only_layers negative", Q, "mlp_only_layers", "[-1]",
     "config.json: mlp_only_layers[0] = -1 is not a layer"},
    {"mlp_only_layers fractional", Q, "mlp_only_layers", "[1.5]",
     "config.json: mlp_only_layers[0] = 1.5 is not an integer"},
    {"mlp_only_layers a string entry", Q, "mlp_only_layers", "[\"3\"]",
     "config.json: mlp_only_layers[0] = \"3\" is not an integer"},
    {"mlp_only_layers not an array", Q, "mlp_only_layers", "3",
     "config.json: mlp_only_layers = 3 is not an array"},
    {"mlp_only_layers an object", Q, "mlp_only_layers", "{}",
     "config.json: mlp_only_layers = an object is not an array"},
    /* the document */
    {"not an object", "[]", NULL, NULL, "config.json: the document is an array, not an object"},
    {"not JSON", "{\"model_type\": llama}", NULL, NULL,
     "config.json: json: line 1 column 16: expected a value (found 'l')"},
    {"empty", "", NULL, NULL,
     "config.json: json: line 1 column 1: expected a value (found end of input)"},
    {"duplicate key", "{\"model_type\": \"llama\", \"model_type\": \"qwen3_moe\"}", NULL, NULL,
     "config.json: json: line 1 column 25: duplicate key \"model_type\""},
};

static void test_error(void **state) {
    const err_row *r = (const err_row *)*state;
    char *text = r->key ? edit(r->base, r->key, r->value) : NULL;
    const char *msg = r->msg;
    model_config c;
    if (r->key && !r->value && !msg) { /* "rope_parameters theta 0" */
        char *t2 = edit(text, "rope_parameters", "{\"rope_type\": \"default\", \"rope_theta\": 0}");
        free(text);
        text = t2;
        msg = "config.json: rope_parameters.rope_theta = 0 must be > 0";
    }
    memset(&c, 0x55, sizeof c);
    if (model_config_parse(&c, text ? text : r->base, strlen(text ? text : r->base), err,
                           sizeof err) != -1)
        fail_msg("parsed, expected \"%s\"", msg);
    assert_contains(err, msg);
    assert_int_equal(c.hidden_size, 0); /* cleared on failure */
    assert_int_equal(c.torch_dtype[0], 0);
    free(text);
}

/* 256 entries fit, 257 do not. */
static void test_mlp_only_layers_count(void **state) {
    char list[2048], *text;
    size_t o = 0;
    int i;
    model_config c;
    (void)state;
    for (i = 0; i < 256; i++)
        o += (size_t)snprintf(list + o, sizeof list - o, "%s%d", i ? "," : "[", i % 48);
    snprintf(list + o, sizeof list - o, "]");
    text = edit(QWEN3_30B_A3B, "mlp_only_layers", list);
    parse_ok(&c, text);
    assert_int_equal(c.num_mlp_only_layers, 256);
    for (i = 0; i < 48; i++) assert_int_equal(model_config_layer_is_moe(&c, i), 0);
    free(text);
    snprintf(list + o, sizeof list - o, ",0]");
    text = edit(QWEN3_30B_A3B, "mlp_only_layers", list);
    assert_int_equal(model_config_parse(&c, text, strlen(text), err, sizeof err), -1);
    assert_contains(err, "config.json: mlp_only_layers has 257 entries (at most 256)");
    free(text);
}

/* transformers 5 writes num_local_experts where earlier versions wrote num_experts. */
static void test_num_local_experts(void **state) {
    char *t1 = edit(QWEN3_30B_A3B, "num_experts", NULL),
         *t2 = edit(t1, "num_local_experts", "64");
    model_config c;
    (void)state;
    parse_ok(&c, t2);
    assert_int_equal(c.num_experts, 64);
    assert_int_equal(model_config_parse(&c, t1, strlen(t1), err, sizeof err), -1);
    assert_contains(err, "config.json: missing num_experts (or num_local_experts)");
    free(t1);
    free(t2);
}

/* decoder_sparse_step and mlp_only_layers pick the MoE layers. */
static void test_layer_is_moe(void **state) {
    char *t1 = edit(QWEN3_30B_A3B, "decoder_sparse_step", "2"),
         *t2 = edit(t1, "mlp_only_layers", "[0, 5, 47]");
    static const int want[12] = {0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0, 1};
    model_config c;
    int64_t i;
    (void)state;
    parse_ok(&c, t2);
    assert_int_equal(c.decoder_sparse_step, 2);
    assert_int_equal(c.num_mlp_only_layers, 3);
    assert_int_equal(c.mlp_only_layers[2], 47);
    for (i = 0; i < 12; i++)
        if (model_config_layer_is_moe(&c, i) != want[i]) fail_msg("layer %d: %d", (int)i, !want[i]);
    assert_int_equal(model_config_layer_is_moe(&c, 45), 1);
    assert_int_equal(model_config_layer_is_moe(&c, 47), 0); /* (47 + 1) % 2 == 0, but mlp-only */
    assert_int_equal(model_config_layer_is_moe(&c, 48), 0);
    c.decoder_sparse_step = 0; /* a hand-made config never divides by zero */
    assert_int_equal(model_config_layer_is_moe(&c, 1), 0);
    free(t1);
    free(t2);
}

/* ---------------------------------------------------------------- files */
static void test_load(void **state) {
    char dir[64], path[128];
    model_config c;
    FILE *f;
    (void)state;
    strcpy(dir, "/tmp/talon-ex-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/config.json", dir);
    assert_int_equal(model_config_load(&c, dir, err, sizeof err), -1);
    assert_contains(err, "config.json: No such file or directory");
    f = fopen(path, "wb");
    assert_non_null(f);
    fputs(QWEN3_30B_A3B, f);
    fclose(f);
    if (model_config_load(&c, dir, err, sizeof err) != 0) fail_msg("%s", err);
    assert_int_equal(c.num_experts, 128);
    memset(&c, 0, sizeof c);
    if (model_config_load(&c, path, err, sizeof err) != 0) fail_msg("%s", err);
    assert_int_equal(c.arch, MODEL_QWEN3_MOE);
    f = fopen(path, "wb");
    fputs("{\"model_type\": \"gpt2\"}", f);
    fclose(f);
    assert_int_equal(model_config_load(&c, path, err, sizeof err), -1);
    assert_contains(err, "model_type = \"gpt2\" is not supported");
    unlink(path);
    assert_int_equal(mkfifo(path, 0600), 0); /* must not block */
    assert_int_equal(model_config_load(&c, dir, err, sizeof err), -1);
    assert_contains(err, "config.json: not a regular file");
    unlink(path);
    rmdir(dir);
    assert_int_equal(model_config_load(&c, NULL, err, sizeof err), -1);
    assert_contains(err, "no path");
    assert_int_equal(model_config_load(&c, "/nonexistent/talon/config.json", err, sizeof err), -1);
    assert_contains(err, "/nonexistent/talon/config.json: No such file or directory");
    assert_int_equal(model_config_parse(NULL, "{}", 2, err, sizeof err), -1);
    assert_int_equal(model_config_parse(&c, "{}", 2, NULL, 0), -1);
}

/* Every truncation of a real config fails cleanly (none is valid JSON but the whole text). */
static void test_truncated(void **state) {
    size_t n = strlen(QWEN3_30B_A3B), k;
    model_config c;
    (void)state;
    for (k = 0; k < n; k++) {
        char *copy = (char *)malloc(k + 1);
        int rc;
        memcpy(copy, QWEN3_30B_A3B, k);
        rc = model_config_parse(&c, copy, k, err, sizeof err);
        free(copy);
        if (k < n - 1 && rc != -1) fail_msg("parsed at %lu bytes", (unsigned long)k);
        if (rc == -1 && strncmp(err, "config.json: ", 13) != 0) fail_msg("message \"%s\"", err);
    }
}

/* ---------------------------------------------------------------- registration */
#include "registry.h"

int main(void) {
    size_t i;
    ADD(test_llama3_8b);
    ADD(test_llama31_8b);
    ADD(test_llama32_1b);
    ADD(test_qwen3_30b_a3b);
    ADD(test_edit_helper);
    for (i = 0; i < sizeof ok_rows / sizeof ok_rows[0]; i++)
        add(ok_rows[i].name, test_ok, &ok_rows[i]);
    for (i = 0; i < sizeof err_rows / sizeof err_rows[0]; i++)
        add(err_rows[i].name, test_error, &err_rows[i]);
    ADD(test_mlp_only_layers_count);
    ADD(test_layer_is_moe);
    ADD(test_num_local_experts);
    ADD(test_load);
    ADD(test_truncated);
    return _cmocka_run_group_tests("model_config", tests, ntests, NULL, NULL);
}
