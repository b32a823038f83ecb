/* Strict JSON parser (RFC 8259): see json.h. Recursive descent, depth-limited; children are
   collected on two growable stacks (values, object members) and copied into the arena when
   their container closes, so a container's elements are one contiguous array. */
#include "json.h"

#include <errno.h>
#include <locale.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct json_member {
    const char *key;
    size_t key_len;
    size_t pos; /* offset of the key in the text, for the duplicate-key message */
    json_value *value;
} json_member;

struct json_value {
    json_type type;
    int flag; /* bool: its value; number: 1 when i is exact */
    size_t n; /* string: bytes; array/object: count */
    union {
        struct {
            double d;
            int64_t i;
        } num;
        const char *str;
        json_value *elems; /* array: n values */
        struct {
            json_member *m;       /* n members, document order */
            json_member **sorted; /* the same, by key (memcmp order, shorter first on ties) */
        } obj;
    } u;
};

/* ---------------------------------------------------------------- arena */
typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
} arena_block;

#define ARENA_ALIGN 16
#define ARENA_HEADER ((sizeof(arena_block) + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN)
#define ARENA_MIN_BLOCK ((size_t)64 * 1024)

/* The root value lives first in the first block, beside the list of blocks to free. */
typedef struct json_doc {
    json_value root;
    arena_block *blocks;
} json_doc;

static void arena_free(arena_block *b) {
    while (b) {
        arena_block *next = b->next;
        free(b);
        b = next;
    }
}

/* ---------------------------------------------------------------- parser state */
typedef struct parser {
    const char *s;
    size_t n, pos;
    char *err;
    size_t err_len;
    arena_block *blocks; /* newest first */
    json_value *vals;    /* pending array elements */
    size_t nvals, capvals;
    json_member *mems;   /* pending object members */
    json_value *memvals; /* their values, parallel to mems */
    size_t nmems, capmems;
} parser;

static void *arena_alloc(parser *p, size_t size) {
    arena_block *b = p->blocks;
    size_t need;
    if (size > (size_t)-1 - ARENA_ALIGN) return NULL;
    need = (size + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    if (!b || b->cap - b->used < need) {
        size_t cap = need > ARENA_MIN_BLOCK ? need : ARENA_MIN_BLOCK;
        if (cap > (size_t)-1 - ARENA_HEADER) return NULL;
        b = (arena_block *)malloc(ARENA_HEADER + cap);
        if (!b) return NULL;
        b->cap = cap;
        b->used = 0;
        /* A big request gets its own block behind the current one, which keeps its space. */
        if (p->blocks && need > ARENA_MIN_BLOCK / 4) {
            b->next = p->blocks->next;
            p->blocks->next = b;
        } else {
            b->next = p->blocks;
            p->blocks = b;
        }
    }
    b->used += need;
    return (char *)b + ARENA_HEADER + (b->used - need);
}

/* ---------------------------------------------------------------- errors */
static void describe_found(const parser *p, size_t pos, char *buf, size_t n) {
    unsigned char c;
    if (pos >= p->n) {
        snprintf(buf, n, "end of input");
        return;
    }
    c = (unsigned char)p->s[pos];
    if (c >= 0x20 && c < 0x7f) snprintf(buf, n, "'%c'", c);
    else snprintf(buf, n, "byte 0x%02x", c);
}

#if defined(__GNUC__)
#define PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#else
#define PRINTF_LIKE(f, a)
#endif
static int fail(parser *p, size_t pos, const char *fmt, ...) PRINTF_LIKE(3, 4);
static int fail(parser *p, size_t pos, const char *fmt, ...) {
    size_t line = 1, col = 1, i, k;
    va_list ap;
    if (!p->err || p->err_len == 0) return 0;
    if (pos > p->n) pos = p->n;
    for (i = 0; i < pos; i++) {
        if (p->s[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    snprintf(p->err, p->err_len, "json: line %lu column %lu: ", (unsigned long)line,
             (unsigned long)col);
    k = strlen(p->err);
    va_start(ap, fmt);
    vsnprintf(p->err + k, p->err_len - k, fmt, ap);
    va_end(ap);
    return 0;
}

/* "expected X (found Y)" at pos. */
static int fail_expected(parser *p, size_t pos, const char *what) {
    char found[32];
    describe_found(p, pos, found, sizeof found);
    return fail(p, pos, "expected %s (found %s)", what, found);
}

static int oom(parser *p) {
    if (p->err && p->err_len) snprintf(p->err, p->err_len, "json: out of memory");
    return 0;
}

/* ---------------------------------------------------------------- lexing */
static void skip_ws(parser *p) {
    while (p->pos < p->n) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int hex4(const char *s, unsigned *out) {
    unsigned v = 0;
    int i;
    for (i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

static size_t put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* At '"': decodes the string into the arena. Decoded bytes never outnumber the source bytes
   (an escape of 6 source bytes gives at most 3, a pair of 12 gives 4). */
static int parse_string(parser *p, const char **out, size_t *out_len) {
    size_t open = p->pos, start = p->pos + 1, end = start, i;
    char *buf;
    size_t o = 0;
    while (end < p->n && p->s[end] != '"') end += p->s[end] == '\\' ? 2 : 1;
    if (end >= p->n) return fail(p, open, "unterminated string");
    buf = (char *)arena_alloc(p, end - start + 1);
    if (!buf) return oom(p);
    i = start;
    while (i < end) {
        unsigned char c = (unsigned char)p->s[i];
        if (c < 0x20) return fail(p, i, "control character 0x%02x in string (escape it)", c);
        if (c != '\\') {
            buf[o++] = (char)c;
            i++;
            continue;
        }
        c = (unsigned char)p->s[i + 1]; /* i + 1 < end: the scan above skipped both bytes */
        switch (c) {
        case '"': buf[o++] = '"'; break;
        case '\\': buf[o++] = '\\'; break;
        case '/': buf[o++] = '/'; break;
        case 'b': buf[o++] = '\b'; break;
        case 'f': buf[o++] = '\f'; break;
        case 'n': buf[o++] = '\n'; break;
        case 'r': buf[o++] = '\r'; break;
        case 't': buf[o++] = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (end - i < 6 || !hex4(p->s + i + 2, &cp))
                return fail(p, i, "invalid \\u escape (expected 4 hex digits)");
            if (cp >= 0xdc00 && cp <= 0xdfff)
                return fail(p, i, "unpaired UTF-16 low surrogate \\u%04x", cp);
            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (end - i < 12 || p->s[i + 6] != '\\' || p->s[i + 7] != 'u' ||
                    !hex4(p->s + i + 8, &lo) || lo < 0xdc00 || lo > 0xdfff)
                    return fail(
                        p, i, "UTF-16 high surrogate \\u%04x not followed by a low surrogate", cp);
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                i += 6;
            }
            o += put_utf8(buf + o, cp);
            i += 4; /* with the 2 below: the 6 bytes of \uXXXX */
            break;
        }
        default:
            if (c >= 0x20 && c < 0x7f) return fail(p, i, "invalid escape '\\%c' in string", c);
            return fail(p, i, "invalid escape (backslash, byte 0x%02x) in string", c);
        }
        i += 2;
    }
    buf[o] = 0;
    *out = buf;
    *out_len = o;
    p->pos = end + 1;
    return 1;
}

/* The exact integer value of a number's digits, if it is one that fits int64. ip: integer
   digits, fp: fraction digits, e10: the (clamped) decimal exponent. */
static int exact_int64(const char *ip, size_t ni, const char *fp, size_t nf, int64_t e10, int neg,
                       int64_t *out) {
    /* The significand is the digits ip fp; strip its leading and trailing zeros. */
    char digits[40];
    size_t nd = 0, total = ni + nf, first = 0, last, k;
    int64_t e;
    uint64_t u = 0;
    while (first < total && (first < ni ? ip[first] : fp[first - ni]) == '0') first++;
    if (first == total) {
        *out = 0;
        return 1;
    }
    last = total;
    while ((last - 1 < ni ? ip[last - 1] : fp[last - 1 - ni]) == '0') last--;
    /* value = digits[first, last) * 10^(e10 - nf + (total - last)) */
    if (last - first > 19) return 0;
    e = e10 - (int64_t)nf + (int64_t)(total - last);
    if (e < 0 || e > 19 || (int64_t)(last - first) + e > 19) return 0;
    for (k = first; k < last; k++) digits[nd++] = k < ni ? ip[k] : fp[k - ni];
    for (k = 0; k < nd; k++) u = u * 10 + (uint64_t)(digits[k] - '0'); /* < 10^19 < 2^64 */
    for (k = 0; k < (size_t)e; k++) {
        if (u > UINT64_MAX / 10) return 0;
        u *= 10;
    }
    if (neg) {
        if (u > (uint64_t)INT64_MAX + 1) return 0;
        *out = u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u;
    } else {
        if (u > (uint64_t)INT64_MAX) return 0;
        *out = (int64_t)u;
    }
    return 1;
}

/* strtod on a copy, with '.' turned into the locale's decimal point. */
static int to_double(parser *p, size_t start, size_t end, double *out) {
    char small[128], *buf = small, *stop;
    const char *dp = localeconv()->decimal_point;
    size_t dpl = dp && *dp ? strlen(dp) : 1, need, i, o = 0;
    double d;
    if (end - start > ((size_t)-1 - 1) / (dpl + 1)) return oom(p);
    need = (end - start) * (dpl + 1) + 1;
    if (need > sizeof small) {
        buf = (char *)malloc(need);
        if (!buf) return oom(p);
    }
    for (i = start; i < end; i++) {
        if (p->s[i] == '.' && dp && *dp) {
            memcpy(buf + o, dp, dpl);
            o += dpl;
        } else {
            buf[o++] = p->s[i];
        }
    }
    buf[o] = 0;
    errno = 0;
    d = strtod(buf, &stop);
    i = (size_t)(stop - buf);
    if (buf != small) free(buf);
    if (i != o) return fail(p, start, "invalid number");
    if (errno == ERANGE && (d > 1.0 || d < -1.0))
        return fail(p, start, "number out of the double range");
    *out = d;
    return 1;
}

static int parse_number(parser *p, json_value *v) {
    const char *s = p->s;
    size_t i = p->pos, n = p->n, start = p->pos, ip, ni, fp = 0, nf = 0;
    int neg = 0, eneg = 0;
    int64_t e10 = 0;
    if (s[i] == '-') {
        neg = 1;
        i++;
    }
    if (i >= n || !is_digit(s[i])) return fail_expected(p, i, "a digit after '-'");
    ip = i;
    if (s[i] == '0') {
        i++;
        if (i < n && is_digit(s[i]))
            return fail(p, start, "invalid number: leading zeros are not allowed");
    } else {
        while (i < n && is_digit(s[i])) i++;
    }
    ni = i - ip;
    if (i < n && s[i] == '.') {
        i++;
        if (i >= n || !is_digit(s[i])) return fail_expected(p, i, "a digit after '.' in a number");
        fp = i;
        while (i < n && is_digit(s[i])) i++;
        nf = i - fp;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) eneg = s[i++] == '-';
        if (i >= n || !is_digit(s[i])) return fail_expected(p, i, "a digit in a number's exponent");
        while (i < n && is_digit(s[i])) {
            /* clamped: beyond the double range either way */
            if (e10 < INT64_C(1000000000)) e10 = e10 * 10 + (s[i] - '0');
            i++;
        }
        if (eneg) e10 = -e10;
    }
    v->type = JSON_NUMBER;
    if (!to_double(p, start, i, &v->u.num.d)) return 0;
    v->flag = exact_int64(s + ip, ni, s + fp, nf, e10, neg, &v->u.num.i);
    p->pos = i;
    return 1;
}

static int literal(parser *p, const char *word, size_t len) {
    if (p->n - p->pos < len || memcmp(p->s + p->pos, word, len) != 0)
        return fail_expected(p, p->pos, "a value");
    p->pos += len;
    return 1;
}

/* ---------------------------------------------------------------- values */
static int parse_value(parser *p, json_value *v, int depth);

static int push_val(parser *p, const json_value *v) {
    if (p->nvals == p->capvals) {
        size_t cap = p->capvals ? p->capvals * 2 : 64;
        json_value *nv;
        if (cap > (size_t)-1 / sizeof *nv) return oom(p);
        nv = (json_value *)realloc(p->vals, cap * sizeof *nv);
        if (!nv) return oom(p);
        p->vals = nv;
        p->capvals = cap;
    }
    p->vals[p->nvals++] = *v;
    return 1;
}

static int push_member(parser *p, const char *key, size_t key_len, size_t pos,
                       const json_value *v) {
    if (p->nmems == p->capmems) {
        size_t cap = p->capmems ? p->capmems * 2 : 64;
        json_member *nm;
        json_value *nv;
        if (cap > (size_t)-1 / sizeof *nv) return oom(p);
        nm = (json_member *)realloc(p->mems, cap * sizeof *nm);
        if (!nm) return oom(p);
        p->mems = nm;
        nv = (json_value *)realloc(p->memvals, cap * sizeof *nv);
        if (!nv) return oom(p);
        p->memvals = nv;
        p->capmems = cap;
    }
    p->mems[p->nmems].key = key;
    p->mems[p->nmems].key_len = key_len;
    p->mems[p->nmems].pos = pos;
    p->mems[p->nmems].value = NULL;
    p->memvals[p->nmems] = *v;
    p->nmems++;
    return 1;
}

static int key_cmp(const char *a, size_t na, const char *b, size_t nb) {
    int c = memcmp(a, b, na < nb ? na : nb);
    if (c) return c;
    return na < nb ? -1 : na > nb;
}

static int member_ptr_cmp(const void *x, const void *y) {
    const json_member *a = *(const json_member *const *)x, *b = *(const json_member *const *)y;
    int c = key_cmp(a->key, a->key_len, b->key, b->key_len);
    if (c) return c;
    return a->pos < b->pos ? -1 : a->pos > b->pos;
}

static int parse_array(parser *p, json_value *v, int depth) {
    size_t base = p->nvals, count;
    p->pos++; /* '[' */
    skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == ']') {
        p->pos++;
    } else {
        for (;;) {
            json_value child;
            if (!parse_value(p, &child, depth + 1) || !push_val(p, &child)) return 0;
            skip_ws(p);
            if (p->pos < p->n && p->s[p->pos] == ',') {
                p->pos++;
                continue;
            }
            if (p->pos < p->n && p->s[p->pos] == ']') {
                p->pos++;
                break;
            }
            return fail_expected(p, p->pos, "',' or ']' in array");
        }
    }
    count = p->nvals - base;
    v->type = JSON_ARRAY;
    v->n = count;
    v->u.elems = NULL;
    if (count) {
        /* count * size cannot wrap: the stack held as many */
        v->u.elems = (json_value *)arena_alloc(p, count * sizeof(json_value));
        if (!v->u.elems) return oom(p);
        memcpy(v->u.elems, p->vals + base, count * sizeof(json_value));
    }
    p->nvals = base;
    return 1;
}

static int parse_object(parser *p, json_value *v, int depth) {
    size_t base = p->nmems, count, i;
    json_member *m;
    json_value *vals;
    json_member **sorted;
    p->pos++; /* '{' */
    skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == '}') {
        p->pos++;
    } else {
        for (;;) {
            const char *key;
            size_t key_len, key_pos;
            json_value child;
            skip_ws(p);
            key_pos = p->pos;
            if (p->pos >= p->n || p->s[p->pos] != '"')
                return fail_expected(p, p->pos, "a string key in object");
            if (!parse_string(p, &key, &key_len)) return 0;
            skip_ws(p);
            if (p->pos >= p->n || p->s[p->pos] != ':')
                return fail_expected(p, p->pos, "':' after object key");
            p->pos++;
            if (!parse_value(p, &child, depth + 1) ||
                !push_member(p, key, key_len, key_pos, &child))
                return 0;
            skip_ws(p);
            if (p->pos < p->n && p->s[p->pos] == ',') {
                p->pos++;
                continue;
            }
            if (p->pos < p->n && p->s[p->pos] == '}') {
                p->pos++;
                break;
            }
            return fail_expected(p, p->pos, "',' or '}' in object");
        }
    }
    count = p->nmems - base;
    v->type = JSON_OBJECT;
    v->n = count;
    v->u.obj.m = NULL;
    v->u.obj.sorted = NULL;
    if (count) {
        m = (json_member *)arena_alloc(p, count * sizeof *m);
        vals = (json_value *)arena_alloc(p, count * sizeof *vals);
        sorted = (json_member **)arena_alloc(p, count * sizeof *sorted);
        if (!m || !vals || !sorted) return oom(p);
        memcpy(m, p->mems + base, count * sizeof *m);
        memcpy(vals, p->memvals + base, count * sizeof *vals);
        for (i = 0; i < count; i++) {
            m[i].value = &vals[i];
            sorted[i] = &m[i];
        }
        qsort(sorted, count, sizeof *sorted, member_ptr_cmp);
        for (i = 1; i < count; i++) {
            const json_member *a = sorted[i - 1], *b = sorted[i];
            if (a->key_len == b->key_len && memcmp(a->key, b->key, a->key_len) == 0)
                return fail(p, b->pos, "duplicate key \"%.*s\" in object",
                            (int)(a->key_len > 200 ? 200 : a->key_len), a->key);
        }
        v->u.obj.m = m;
        v->u.obj.sorted = sorted;
    }
    p->nmems = base;
    return 1;
}

static int parse_value(parser *p, json_value *v, int depth) {
    char c;
    memset(v, 0, sizeof *v);
    skip_ws(p);
    if (p->pos >= p->n) return fail_expected(p, p->pos, "a value");
    c = p->s[p->pos];
    switch (c) {
    case '{':
    case '[':
        if (depth >= JSON_MAX_DEPTH)
            return fail(p, p->pos, "nesting deeper than %d arrays/objects", JSON_MAX_DEPTH);
        return c == '{' ? parse_object(p, v, depth) : parse_array(p, v, depth);
    case '"': v->type = JSON_STRING; return parse_string(p, &v->u.str, &v->n);
    case 't':
        v->type = JSON_BOOL;
        v->flag = 1;
        return literal(p, "true", 4);
    case 'f': v->type = JSON_BOOL; return literal(p, "false", 5);
    case 'n': v->type = JSON_NULL; return literal(p, "null", 4);
    default:
        if (c == '-' || is_digit(c)) return parse_number(p, v);
        return fail_expected(p, p->pos, "a value");
    }
}

/* ---------------------------------------------------------------- API */
json_value *json_parse(const char *text, size_t len, char *err, size_t err_len) {
    parser p;
    json_doc *doc;
    json_value root;
    int ok;
    memset(&p, 0, sizeof p);
    p.s = text;
    p.n = text ? len : 0;
    p.err = err;
    p.err_len = err_len;
    if (err && err_len) err[0] = 0;
    doc = (json_doc *)arena_alloc(&p, sizeof *doc);
    if (!doc) {
        oom(&p);
        return NULL;
    }
    ok = parse_value(&p, &root, 0);
    if (ok) {
        skip_ws(&p);
        if (p.pos < p.n) ok = fail_expected(&p, p.pos, "end of input after the value");
    }
    free(p.vals);
    free(p.mems);
    free(p.memvals);
    if (!ok) {
        arena_free(p.blocks);
        return NULL;
    }
    doc->root = root;
    doc->blocks = p.blocks;
    return &doc->root;
}

void json_free(json_value *v) {
    if (v) arena_free(((json_doc *)(void *)v)->blocks);
}

json_type json_type_of(const json_value *v) { return v ? v->type : JSON_NULL; }

const json_value *json_get(const json_value *obj, const char *key) {
    size_t lo = 0, hi, klen;
    if (!obj || obj->type != JSON_OBJECT || !key) return NULL;
    klen = strlen(key);
    hi = obj->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const json_member *m = obj->u.obj.sorted[mid];
        int c = key_cmp(m->key, m->key_len, key, klen);
        if (c == 0) return m->value;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

size_t json_count(const json_value *v) {
    return v && (v->type == JSON_ARRAY || v->type == JSON_OBJECT) ? v->n : 0;
}

const json_value *json_at(const json_value *v, size_t i) {
    if (!v || i >= json_count(v)) return NULL;
    return v->type == JSON_ARRAY ? &v->u.elems[i] : v->u.obj.m[i].value;
}

const char *json_key_at(const json_value *obj, size_t i) {
    if (!obj || obj->type != JSON_OBJECT || i >= obj->n) return NULL;
    return obj->u.obj.m[i].key;
}

size_t json_key_len(const json_value *obj, size_t i) {
    if (!obj || obj->type != JSON_OBJECT || i >= obj->n) return 0;
    return obj->u.obj.m[i].key_len;
}

const char *json_string(const json_value *v) {
    return v && v->type == JSON_STRING ? v->u.str : NULL;
}

size_t json_string_len(const json_value *v) { return v && v->type == JSON_STRING ? v->n : 0; }

int json_number(const json_value *v, double *out) {
    if (!v || v->type != JSON_NUMBER) return 0;
    if (out) *out = v->u.num.d;
    return 1;
}

int json_int64(const json_value *v, int64_t *out) {
    if (!v || v->type != JSON_NUMBER || !v->flag) return 0;
    if (out) *out = v->u.num.i;
    return 1;
}

int json_bool(const json_value *v, int *out) {
    if (!v || v->type != JSON_BOOL) return 0;
    if (out) *out = v->flag;
    return 1;
}
