/* config.json for Llama and Qwen3-MoE: see model_config.h. */
#define _POSIX_C_SOURCE 200809L
#include "model_config.h"

#include "json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DIM_MAX INT64_C(2147483647)
#define CONFIG_MAX_BYTES ((size_t)16 * 1024 * 1024)

typedef struct cfg {
    const json_value *root;
    char *err;
    size_t err_len;
} cfg;

#if defined(__GNUC__)
#define PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#else
#define PRINTF_LIKE(f, a)
#endif
static int seterr(char *err, size_t err_len, const char *fmt, ...) PRINTF_LIKE(3, 4);
static int seterr(char *err, size_t err_len, const char *fmt, ...) {
    va_list ap;
    if (err && err_len) {
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
    }
    return 0;
}

/* The shortest %g form that reads back as d: 1e-05, not 1.0000000000000001e-05. */
static const char *num(double d, char *buf, size_t n) {
    int prec;
    if (d > -1e15 && d < 1e15 && d == (double)(long long)d) {
        snprintf(buf, n, "%lld", (long long)d); /* 10000, not 1e+04 */
        return buf;
    }
    for (prec = 1; prec < 17; prec++) {
        snprintf(buf, n, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) return buf;
    }
    snprintf(buf, n, "%.17g", d);
    return buf;
}

/* A value as it reads in a message: 4096, 1e-05, "llama", true, null, an array. */
static const char *show(const json_value *v, char *buf, size_t n) {
    int64_t i;
    double d;
    int b;
    switch (json_type_of(v)) {
    case JSON_NULL: return "null";
    case JSON_BOOL: json_bool(v, &b); return b ? "true" : "false";
    case JSON_NUMBER:
        if (json_int64(v, &i)) snprintf(buf, n, "%lld", (long long)i);
        else if (json_number(v, &d)) num(d, buf, n);
        return buf;
    case JSON_STRING:
        snprintf(buf, n, "\"%.40s%s\"", json_string(v), json_string_len(v) > 40 ? "..." : "");
        return buf;
    case JSON_ARRAY: return "an array";
    case JSON_OBJECT: return "an object";
    }
    return "?";
}

/* The member `key` of obj; optional ones read null as absent. */
static const json_value *member(const json_value *obj, const char *key, int optional) {
    const json_value *v = json_get(obj, key);
    return optional && json_type_of(v) == JSON_NULL ? NULL : v;
}

/* An integer in [lo, hi]: *out = dflt when optional and absent. prefix names where the field
   lives ("" at the top, "rope_scaling." inside). */
static int get_int(const cfg *c, const json_value *obj, const char *prefix, const char *key,
                   int optional, int64_t dflt, int64_t lo, int64_t hi, int64_t *out) {
    const json_value *v = member(obj, key, optional);
    char buf[64];
    int64_t x;
    if (!v) {
        if (optional) {
            *out = dflt;
            return 1;
        }
        return seterr(c->err, c->err_len, "config.json: missing %s%s", prefix, key);
    }
    if (!json_int64(v, &x))
        return seterr(c->err, c->err_len, "config.json: %s%s = %s is not an integer", prefix, key,
                      show(v, buf, sizeof buf));
    if (x < lo || x > hi)
        return seterr(c->err, c->err_len, "config.json: %s%s = %lld is out of range [%lld, %lld]",
                      prefix, key, (long long)x, (long long)lo, (long long)hi);
    *out = x;
    return 1;
}

/* A number > 0 (finite: the parser rejects what overflows a double). */
static int get_positive(const cfg *c, const json_value *obj, const char *prefix, const char *key,
                        int optional, double dflt, double *out) {
    const json_value *v = member(obj, key, optional);
    char buf[64];
    double x;
    if (!v) {
        if (optional) {
            *out = dflt;
            return 1;
        }
        return seterr(c->err, c->err_len, "config.json: missing %s%s", prefix, key);
    }
    if (!json_number(v, &x))
        return seterr(c->err, c->err_len, "config.json: %s%s = %s is not a number", prefix, key,
                      show(v, buf, sizeof buf));
    if (!(x > 0))
        return seterr(c->err, c->err_len, "config.json: %s%s = %s must be > 0", prefix, key,
                      num(x, buf, sizeof buf));
    *out = x;
    return 1;
}

static int get_bool(const cfg *c, const char *key, int dflt, int *out) {
    const json_value *v = member(c->root, key, 1);
    char buf[64];
    if (!v) {
        *out = dflt;
        return 1;
    }
    if (!json_bool(v, out))
        return seterr(c->err, c->err_len, "config.json: %s = %s is not true or false", key,
                      show(v, buf, sizeof buf));
    return 1;
}

static int parse_rope(const cfg *c, model_config *m) {
    const json_value *rs = member(c->root, "rope_scaling", 1),
                     *params = member(c->root, "rope_parameters", 1);
    const json_value *tv;
    const char *where = "rope_scaling", *type;
    char prefix[32], buf[64], buf2[64];
    if (!rs && params) {
        rs = params;
        where = "rope_parameters";
    }
    /* rope_theta: top level, else inside rope_parameters (transformers 5), else 10000. */
    if (member(c->root, "rope_theta", 1) || json_type_of(params) != JSON_OBJECT ||
        !json_get(params, "rope_theta")) {
        if (!get_positive(c, c->root, "", "rope_theta", 1, 10000.0, &m->rope_theta)) return 0;
    } else if (!get_positive(c, params, "rope_parameters.", "rope_theta", 0, 0, &m->rope_theta)) {
        return 0;
    }
    m->rope_scaling = ROPE_SCALING_NONE;
    if (!rs) return 1;
    if (json_type_of(rs) != JSON_OBJECT)
        return seterr(c->err, c->err_len, "config.json: %s = %s is not an object or null", where,
                      show(rs, buf, sizeof buf));
    tv = member(rs, "rope_type", 1);
    if (!tv) tv = member(rs, "type", 1);
    if (!tv) return seterr(c->err, c->err_len, "config.json: %s has no \"rope_type\"", where);
    type = json_string(tv);
    if (!type)
        return seterr(c->err, c->err_len, "config.json: %s.rope_type = %s is not a string", where,
                      show(tv, buf, sizeof buf));
    if (strcmp(type, "default") == 0) return 1;
    if (strcmp(type, "llama3") != 0)
        return seterr(
            c->err, c->err_len,
            "config.json: %s type %s is not supported (expected \"default\" or \"llama3\")", where,
            show(tv, buf, sizeof buf));
    snprintf(prefix, sizeof prefix, "%s.", where);
    if (!get_positive(c, rs, prefix, "factor", 0, 0, &m->rope_factor) ||
        !get_positive(c, rs, prefix, "low_freq_factor", 0, 0, &m->rope_low_freq_factor) ||
        !get_positive(c, rs, prefix, "high_freq_factor", 0, 0, &m->rope_high_freq_factor) ||
        !get_int(c, rs, prefix, "original_max_position_embeddings", 0, 0, 1, DIM_MAX,
                 &m->rope_original_max_pos))
        return 0;
    if (!(m->rope_high_freq_factor > m->rope_low_freq_factor))
        return seterr(c->err, c->err_len,
                      "config.json: %shigh_freq_factor = %s must be > low_freq_factor = %s", prefix,
                      num(m->rope_high_freq_factor, buf, sizeof buf),
                      num(m->rope_low_freq_factor, buf2, sizeof buf2));
    m->rope_scaling = ROPE_SCALING_LLAMA3;
    return 1;
}

static int parse_dtype(const cfg *c, model_config *m) {
    const char *key = "torch_dtype";
    const json_value *v = member(c->root, key, 1);
    const char *s;
    char buf[64];
    if (!v) {
        key = "dtype";
        v = member(c->root, key, 1);
    }
    if (!v) return 1;
    s = json_string(v);
    if (!s || json_string_len(v) >= sizeof m->torch_dtype || strlen(s) != json_string_len(v))
        return seterr(c->err, c->err_len,
                      "config.json: %s = %s is not a dtype name (a string of at most %d bytes)",
                      key, show(v, buf, sizeof buf), (int)sizeof m->torch_dtype - 1);
    memcpy(m->torch_dtype, s, json_string_len(v) + 1);
    return 1;
}

static int parse_moe(const cfg *c, model_config *m) {
    const json_value *ml = member(c->root, "mlp_only_layers", 1);
    size_t i, n;
    char buf[64];
    /* transformers 5 writes the expert count as num_local_experts, earlier ones num_experts */
    const char *experts_key = member(c->root, "num_experts", 1) ? "num_experts"
                                                                 : "num_local_experts";
    if (!member(c->root, experts_key, 1))
        return seterr(c->err, c->err_len,
                      "config.json: missing num_experts (or num_local_experts)");
    if (!get_int(c, c->root, "", experts_key, 0, 0, 1, DIM_MAX, &m->num_experts) ||
        !get_int(c, c->root, "", "num_experts_per_tok", 0, 0, 1, DIM_MAX,
                 &m->num_experts_per_tok) ||
        !get_int(c, c->root, "", "moe_intermediate_size", 0, 0, 1, DIM_MAX,
                 &m->moe_intermediate_size) ||
        !get_int(c, c->root, "", "decoder_sparse_step", 1, 1, 1, DIM_MAX,
                 &m->decoder_sparse_step) ||
        !get_bool(c, "norm_topk_prob", 0, &m->norm_topk_prob))
        return 0;
    if (m->num_experts_per_tok > m->num_experts)
        return seterr(c->err, c->err_len,
                      "config.json: num_experts_per_tok = %lld exceeds num_experts = %lld",
                      (long long)m->num_experts_per_tok, (long long)m->num_experts);
    if (!ml) return 1;
    if (json_type_of(ml) != JSON_ARRAY)
        return seterr(c->err, c->err_len, "config.json: mlp_only_layers = %s is not an array",
                      show(ml, buf, sizeof buf));
    n = json_count(ml);
    if (n > MODEL_MAX_MLP_ONLY_LAYERS)
        return seterr(c->err, c->err_len,
                      "config.json: mlp_only_layers has %lu entries (at most %d)", (unsigned long)n,
                      MODEL_MAX_MLP_ONLY_LAYERS);
    for (i = 0; i < n; i++) {
        const json_value *e = json_at(ml, i);
        int64_t x;
        if (!json_int64(e, &x))
            return seterr(c->err, c->err_len,
                          "config.json: mlp_only_layers[%lu] = %s is not an integer",
                          (unsigned long)i, show(e, buf, sizeof buf));
        if (x < 0 || x >= m->num_hidden_layers)
            return seterr(c->err, c->err_len,
                          "config.json: mlp_only_layers[%lu] = %lld is not a layer "
                          "(num_hidden_layers = %lld)",
                          (unsigned long)i, (long long)x, (long long)m->num_hidden_layers);
        m->mlp_only_layers[i] = x;
    }
    m->num_mlp_only_layers = (int64_t)n;
    return 1;
}

int model_config_parse(model_config *m, const char *text, size_t len, char *err, size_t err_len) {
    char jerr[256], buf[64];
    json_value *root;
    const json_value *mt;
    const char *type;
    cfg c;
    int ok = 0;
    if (err && err_len) err[0] = 0;
    if (!m) {
        seterr(err, err_len, "model_config_parse: no config to fill");
        return -1;
    }
    memset(m, 0, sizeof *m);
    root = json_parse(text, len, jerr, sizeof jerr);
    if (!root) {
        seterr(err, err_len, "config.json: %s", jerr);
        return -1;
    }
    c.root = root;
    c.err = err;
    c.err_len = err_len;
    if (json_type_of(root) != JSON_OBJECT) {
        seterr(err, err_len, "config.json: the document is %s, not an object",
               show(root, buf, sizeof buf));
        goto done;
    }
    mt = json_get(root, "model_type");
    if (!mt) {
        seterr(err, err_len, "config.json: missing model_type");
        goto done;
    }
    type = json_string(mt);
    if (type && strcmp(type, "llama") == 0 && json_string_len(mt) == 5) {
        m->arch = MODEL_LLAMA;
    } else if (type && strcmp(type, "qwen3_moe") == 0 && json_string_len(mt) == 9) {
        m->arch = MODEL_QWEN3_MOE;
    } else {
        seterr(
            err, err_len,
            "config.json: model_type = %s is not supported (expected \"llama\" or \"qwen3_moe\")",
            show(mt, buf, sizeof buf));
        goto done;
    }
    if (!get_int(&c, root, "", "hidden_size", 0, 0, 1, DIM_MAX, &m->hidden_size) ||
        !get_int(&c, root, "", "intermediate_size", 0, 0, 1, DIM_MAX, &m->intermediate_size) ||
        !get_int(&c, root, "", "num_hidden_layers", 0, 0, 1, DIM_MAX, &m->num_hidden_layers) ||
        !get_int(&c, root, "", "num_attention_heads", 0, 0, 1, DIM_MAX, &m->num_attention_heads) ||
        !get_int(&c, root, "", "num_key_value_heads", 1, m->num_attention_heads, 1, DIM_MAX,
                 &m->num_key_value_heads) ||
        !get_int(&c, root, "", "head_dim", 1, 0, 1, DIM_MAX, &m->head_dim) ||
        !get_int(&c, root, "", "vocab_size", 0, 0, 1, DIM_MAX, &m->vocab_size) ||
        !get_int(&c, root, "", "max_position_embeddings", 0, 0, 1, DIM_MAX,
                 &m->max_position_embeddings) ||
        !get_positive(&c, root, "", "rms_norm_eps", 0, 0, &m->rms_norm_eps) ||
        !get_bool(&c, "tie_word_embeddings", 0, &m->tie_word_embeddings) ||
        !get_bool(&c, "attention_bias", 0, &m->attention_bias) || !parse_rope(&c, m) ||
        !parse_dtype(&c, m))
        goto done;
    if (m->num_attention_heads % m->num_key_value_heads != 0) {
        seterr(err, err_len,
               "config.json: num_key_value_heads = %lld does not divide num_attention_heads = %lld",
               (long long)m->num_key_value_heads, (long long)m->num_attention_heads);
        goto done;
    }
    if (m->head_dim == 0) {
        if (m->hidden_size % m->num_attention_heads != 0) {
            seterr(err, err_len,
                   "config.json: head_dim is absent and num_attention_heads = %lld does not divide "
                   "hidden_size = %lld",
                   (long long)m->num_attention_heads, (long long)m->hidden_size);
            goto done;
        }
        m->head_dim = m->hidden_size / m->num_attention_heads;
    }
    if (m->head_dim % 2 != 0) {
        seterr(err, err_len,
               "config.json: head_dim = %lld is odd (rotary embeddings pair the dimensions)",
               (long long)m->head_dim);
        goto done;
    }
    if (m->arch == MODEL_QWEN3_MOE && !parse_moe(&c, m)) goto done;
    ok = 1;
done:
    json_free(root);
    if (!ok) {
        char keep = err && err_len ? err[0] : 0;
        memset(m, 0, sizeof *m);
        if (err && err_len && !keep) seterr(err, err_len, "config.json: invalid");
    }
    return ok ? 0 : -1;
}

int model_config_load(model_config *m, const char *path, char *err, size_t err_len) {
    struct stat sb;
    char *file = NULL, *text = NULL;
    size_t got = 0, size;
    int fd = -1, rc = -1;
    if (err && err_len) err[0] = 0;
    if (!path || !*path) {
        seterr(err, err_len, "model_config_load: no path");
        return -1;
    }
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        size_t n = strlen(path);
        file = (char *)malloc(n + sizeof "/config.json");
        if (!file) {
            seterr(err, err_len, "%s: out of memory", path);
            return -1;
        }
        memcpy(file, path, n);
        memcpy(file + n, "/config.json", sizeof "/config.json");
        path = file;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        seterr(err, err_len, "%s: %s", path, strerror(errno));
        goto done;
    }
    if (fstat(fd, &sb) != 0) {
        seterr(err, err_len, "%s: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(sb.st_mode) || sb.st_size < 0 || (uint64_t)sb.st_size > CONFIG_MAX_BYTES) {
        seterr(err, err_len, "%s: not a regular file of at most %lu bytes", path,
               (unsigned long)CONFIG_MAX_BYTES);
        goto done;
    }
    size = (size_t)sb.st_size;
    text = (char *)malloc(size + 1);
    if (!text) {
        seterr(err, err_len, "%s: out of memory", path);
        goto done;
    }
    while (got < size) {
        ssize_t r = read(fd, text + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            seterr(err, err_len, "%s: read: %s", path,
                   r < 0 ? strerror(errno) : "unexpected end of file");
            goto done;
        }
        got += (size_t)r;
    }
    rc = model_config_parse(m, text, size, err, err_len);
done:
    if (rc != 0 && m) memset(m, 0, sizeof *m);
    if (fd >= 0) close(fd);
    free(text);
    free(file);
    return rc;
}

int model_config_layer_is_moe(const model_config *c, int64_t layer) {
    int64_t i;
    if (!c || c->arch != MODEL_QWEN3_MOE || layer < 0 || layer >= c->num_hidden_layers ||
        c->num_experts <= 0 || c->decoder_sparse_step < 1)
        return 0;
    for (i = 0; i < c->num_mlp_only_layers && i < MODEL_MAX_MLP_ONLY_LAYERS; i++)
        if (c->mlp_only_layers[i] == layer) return 0;
    return (layer + 1) % c->decoder_sparse_step == 0;
}
