/* safetensors reader: see safetensors.h. Each shard is mapped whole (PROT_READ, MAP_PRIVATE);
   its header is parsed in place from the mapping, checked, and reduced to st_tensor rows whose
   names live in one buffer per shard; the JSON tree is freed before the next shard. */
#define _POSIX_C_SOURCE 200809L
#include "safetensors.h"

#include "json.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct st_file {
    char *path;
    void *map;
    size_t map_size;
    const unsigned char *data; /* the data section: after the length and the header */
    uint64_t data_size;
    char *names; /* the names of this shard's tensors, NUL-separated */
} st_file;

struct st_model {
    st_file *files;
    int nfiles;
    st_tensor *tensors; /* sorted by name once open */
    int count, cap;
};

/* Names in messages are cut to this many bytes. */
#define NAME_MAX_SHOWN 200

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    {"BOOL", 1}, {"U8", 1},   {"I8", 1},  {"I16", 2}, {"I32", 4},     {"I64", 8},
    {"F16", 2},  {"BF16", 2}, {"F32", 4}, {"F64", 8}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
};
#define NUM_DTYPES ((int)(sizeof dtypes / sizeof dtypes[0]))

const char *st_dtype_name(st_dtype d) {
    return (int)d >= 0 && (int)d < NUM_DTYPES ? dtypes[d].name : "?";
}

size_t st_dtype_size(st_dtype d) { return (int)d >= 0 && (int)d < NUM_DTYPES ? dtypes[d].size : 0; }

#if defined(__GNUC__)
#define PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#else
#define PRINTF_LIKE(f, a)
#endif
static void seterr(char *err, size_t err_len, const char *fmt, ...) PRINTF_LIKE(3, 4);
static void seterr(char *err, size_t err_len, const char *fmt, ...) {
    va_list ap;
    if (!err || err_len == 0) return;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

static char *dupstr(const char *s, size_t n) {
    char *d = (char *)malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* dir + "/" + name, or NULL when out of memory. */
static char *join(const char *dir, size_t dir_len, const char *name) {
    size_t n = strlen(name);
    char *p;
    if (dir_len > (size_t)-1 - n - 2) return NULL;
    p = (char *)malloc(dir_len + n + 2);
    if (!p) return NULL;
    memcpy(p, dir, dir_len);
    p[dir_len] = '/';
    memcpy(p + dir_len + 1, name, n + 1);
    return p;
}

static const char *json_type_words(const json_value *v) {
    switch (json_type_of(v)) {
    case JSON_NULL: return "null";
    case JSON_BOOL: return "a boolean";
    case JSON_NUMBER: return "a number";
    case JSON_STRING: return "a string";
    case JSON_ARRAY: return "an array";
    case JSON_OBJECT: return "an object";
    }
    return "?";
}

static void fmt_shape(char *buf, size_t n, int ndim, const int64_t *shape) {
    size_t k = 0;
    int i;
    if (n == 0) return;
    buf[0] = 0;
    k += (size_t)snprintf(buf, n, "[");
    for (i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* ---------------------------------------------------------------- files */
/* Files are opened O_NONBLOCK so that a FIFO cannot block the open; fstat then rejects it. */
static int map_file(st_file *f, char *err, size_t err_len) {
    struct stat sb;
    int fd = open(f->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    void *map;
    if (fd < 0) {
        seterr(err, err_len, "%s: %s", f->path, strerror(errno));
        return 0;
    }
    if (fstat(fd, &sb) != 0) {
        seterr(err, err_len, "%s: %s", f->path, strerror(errno));
        close(fd);
        return 0;
    }
    if (!S_ISREG(sb.st_mode)) {
        seterr(err, err_len, "%s: not a regular file", f->path);
        close(fd);
        return 0;
    }
    if (sb.st_size < 8) {
        seterr(
            err, err_len,
            "%s: %lld bytes, too short for a safetensors file (its header length alone is 8 bytes)",
            f->path, (long long)sb.st_size);
        close(fd);
        return 0;
    }
    if ((uint64_t)sb.st_size > (uint64_t)((size_t)-1)) {
        seterr(err, err_len, "%s: %lld bytes, too large to map", f->path, (long long)sb.st_size);
        close(fd);
        return 0;
    }
    map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        seterr(err, err_len, "%s: mmap: %s", f->path, strerror(errno));
        return 0;
    }
    f->map = map;
    f->map_size = (size_t)sb.st_size;
    return 1;
}

static int read_file(const char *path, char **out, size_t *out_len, size_t limit, char *err,
                     size_t err_len) {
    struct stat sb;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    char *buf;
    size_t got = 0, size;
    if (fd < 0) {
        seterr(err, err_len, "%s: %s", path, strerror(errno));
        return 0;
    }
    if (fstat(fd, &sb) != 0) {
        seterr(err, err_len, "%s: %s", path, strerror(errno));
        close(fd);
        return 0;
    }
    if (!S_ISREG(sb.st_mode) || sb.st_size < 0 || (uint64_t)sb.st_size > limit) {
        seterr(err, err_len, "%s: not a regular file of at most %lu bytes", path,
               (unsigned long)limit);
        close(fd);
        return 0;
    }
    size = (size_t)sb.st_size;
    buf = (char *)malloc(size + 1);
    if (!buf) {
        seterr(err, err_len, "%s: out of memory", path);
        close(fd);
        return 0;
    }
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            seterr(err, err_len, "%s: read: %s", path,
                   r < 0 ? strerror(errno) : "unexpected end of file");
            free(buf);
            close(fd);
            return 0;
        }
        got += (size_t)r;
    }
    close(fd);
    buf[size] = 0;
    *out = buf;
    *out_len = size;
    return 1;
}

/* ---------------------------------------------------------------- one header entry */
static int parse_u64_pair(const json_value *a, uint64_t *b, uint64_t *e) {
    int64_t x, y;
    if (json_type_of(a) != JSON_ARRAY || json_count(a) != 2) return 0;
    if (!json_int64(json_at(a, 0), &x) || !json_int64(json_at(a, 1), &y) || x < 0 || y < 0)
        return 0;
    *b = (uint64_t)x;
    *e = (uint64_t)y;
    return 1;
}

static int parse_entry(const st_file *f, const char *name, const json_value *e, st_tensor *t,
                       char *err, size_t err_len) {
    const json_value *dt, *sh, *off;
    const char *ds;
    size_t i, n;
    uint64_t elems = 1, nbytes, esize;
    int zero = 0;
    char shape_s[256];
    if (json_type_of(e) != JSON_OBJECT) {
        seterr(err, err_len, "%s: tensor \"%.*s\": entry is %s, not an object", f->path,
               NAME_MAX_SHOWN, name, json_type_words(e));
        return 0;
    }
    n = json_count(e);
    for (i = 0; i < n; i++) {
        const char *k = json_key_at(e, i);
        if (strcmp(k, "dtype") && strcmp(k, "shape") && strcmp(k, "data_offsets")) {
            seterr(err, err_len,
                   "%s: tensor \"%.*s\": unexpected field \"%.*s\" (expected dtype, shape, "
                   "data_offsets)",
                   f->path, NAME_MAX_SHOWN, name, NAME_MAX_SHOWN, k);
            return 0;
        }
    }
    dt = json_get(e, "dtype");
    sh = json_get(e, "shape");
    off = json_get(e, "data_offsets");
    if (!dt || !sh || !off) {
        seterr(err, err_len, "%s: tensor \"%.*s\": missing \"%s\"", f->path, NAME_MAX_SHOWN, name,
               !dt   ? "dtype"
               : !sh ? "shape"
                     : "data_offsets");
        return 0;
    }
    ds = json_string(dt);
    if (!ds) {
        seterr(err, err_len, "%s: tensor \"%.*s\": dtype is %s, not a string", f->path,
               NAME_MAX_SHOWN, name, json_type_words(dt));
        return 0;
    }
    t->dtype = ST_BOOL;
    for (i = 0; i < (size_t)NUM_DTYPES; i++)
        if (strcmp(ds, dtypes[i].name) == 0 && strlen(ds) == json_string_len(dt)) break;
    if (i == (size_t)NUM_DTYPES) {
        seterr(err, err_len,
               "%s: tensor \"%.*s\": dtype \"%.32s\" is not supported (expected BOOL, U8, I8, I16, "
               "I32, I64, F16, BF16, F32, F64, F8_E4M3 or F8_E5M2)",
               f->path, NAME_MAX_SHOWN, name, ds);
        return 0;
    }
    t->dtype = (st_dtype)i;
    if (json_type_of(sh) != JSON_ARRAY) {
        seterr(err, err_len, "%s: tensor \"%.*s\": shape is %s, not an array", f->path,
               NAME_MAX_SHOWN, name, json_type_words(sh));
        return 0;
    }
    n = json_count(sh);
    if (n > ST_MAX_DIMS) {
        seterr(err, err_len, "%s: tensor \"%.*s\": rank %lu exceeds %d", f->path, NAME_MAX_SHOWN,
               name, (unsigned long)n, ST_MAX_DIMS);
        return 0;
    }
    t->ndim = (int)n;
    for (i = 0; i < n; i++) {
        int64_t d;
        if (!json_int64(json_at(sh, i), &d) || d < 0) {
            seterr(err, err_len, "%s: tensor \"%.*s\": shape[%lu] is not a non-negative integer",
                   f->path, NAME_MAX_SHOWN, name, (unsigned long)i);
            return 0;
        }
        t->shape[i] = d;
        if (d == 0) zero = 1;
    }
    for (i = n; i < ST_MAX_DIMS; i++) t->shape[i] = 0;
    fmt_shape(shape_s, sizeof shape_s, t->ndim, t->shape);
    if (!parse_u64_pair(off, &t->begin, &t->end)) {
        seterr(err, err_len,
               "%s: tensor \"%.*s\": data_offsets is not an array of 2 non-negative integers",
               f->path, NAME_MAX_SHOWN, name);
        return 0;
    }
    if (t->begin > t->end) {
        seterr(err, err_len, "%s: tensor \"%.*s\": data_offsets [%llu, %llu] begin past end",
               f->path, NAME_MAX_SHOWN, name, (unsigned long long)t->begin,
               (unsigned long long)t->end);
        return 0;
    }
    if (t->end > f->data_size) {
        seterr(
            err, err_len,
            "%s: tensor \"%.*s\": data_offsets [%llu, %llu] end past the data section (%llu bytes)",
            f->path, NAME_MAX_SHOWN, name, (unsigned long long)t->begin, (unsigned long long)t->end,
            (unsigned long long)f->data_size);
        return 0;
    }
    esize = dtypes[t->dtype].size;
    if (zero) {
        nbytes = 0;
    } else {
        for (i = 0; i < n; i++) {
            uint64_t d = (uint64_t)t->shape[i];
            if (elems > UINT64_MAX / d) break;
            elems *= d;
        }
        if (i < n || elems > UINT64_MAX / esize) {
            seterr(err, err_len,
                   "%s: tensor \"%.*s\": shape %s of %s has more bytes than fit in 64 bits",
                   f->path, NAME_MAX_SHOWN, name, shape_s, dtypes[t->dtype].name);
            return 0;
        }
        nbytes = elems * esize;
    }
    if (t->end - t->begin != nbytes) {
        seterr(err, err_len,
               "%s: tensor \"%.*s\": data_offsets [%llu, %llu] hold %llu bytes, shape %s of %s "
               "needs %llu",
               f->path, NAME_MAX_SHOWN, name, (unsigned long long)t->begin,
               (unsigned long long)t->end, (unsigned long long)(t->end - t->begin), shape_s,
               dtypes[t->dtype].name, (unsigned long long)nbytes);
        return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- one shard */
static int by_offset(const void *x, const void *y) {
    const st_tensor *a = *(const st_tensor *const *)x, *b = *(const st_tensor *const *)y;
    if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
    return a->end < b->end ? -1 : a->end > b->end;
}

/* No two tensors of rows[0..n) share a byte (empty tensors share none). */
static int check_overlap(const st_file *f, st_tensor *rows, int n, char *err, size_t err_len) {
    const st_tensor **order, *holder = NULL;
    uint64_t max_end = 0;
    int i;
    if (n < 2) return 1;
    order = (const st_tensor **)malloc((size_t)n * sizeof *order);
    if (!order) {
        seterr(err, err_len, "%s: out of memory", f->path);
        return 0;
    }
    for (i = 0; i < n; i++) order[i] = &rows[i];
    qsort(order, (size_t)n, sizeof *order, by_offset);
    for (i = 0; i < n; i++) {
        const st_tensor *t = order[i];
        if (t->begin == t->end) continue;
        if (holder && t->begin < max_end) {
            seterr(err, err_len,
                   "%s: tensors \"%.*s\" [%llu, %llu) and \"%.*s\" [%llu, %llu) overlap", f->path,
                   NAME_MAX_SHOWN, holder->name, (unsigned long long)holder->begin,
                   (unsigned long long)holder->end, NAME_MAX_SHOWN, t->name,
                   (unsigned long long)t->begin, (unsigned long long)t->end);
            free(order);
            return 0;
        }
        if (t->end > max_end) {
            max_end = t->end;
            holder = t;
        }
    }
    free(order);
    return 1;
}

static int grow_tensors(st_model *m, size_t more) {
    size_t need = (size_t)m->count + more, cap = (size_t)m->cap;
    st_tensor *nt;
    if (more > (size_t)INT_MAX / 2 || need > (size_t)INT_MAX / 2) return 0;
    if (need <= cap) return 1;
    cap = cap ? cap : 256;
    while (cap < need) cap *= 2;
    nt = (st_tensor *)realloc(m->tensors, cap * sizeof *nt);
    if (!nt) return 0;
    m->tensors = nt;
    m->cap = (int)cap;
    return 1;
}

static int load_shard(st_model *m, int fi, char *err, size_t err_len) {
    st_file *f = &m->files[fi];
    const unsigned char *b;
    uint64_t hlen = 0, avail;
    json_value *root;
    char jerr[256];
    size_t i, nmem, names_len = 0, off = 0;
    int first = m->count, ok = 0;
    if (!map_file(f, err, err_len)) return 0;
    b = (const unsigned char *)f->map;
    for (i = 0; i < 8; i++) hlen |= (uint64_t)b[i] << (8 * i);
    avail = (uint64_t)f->map_size - 8;
    if (hlen == 0) {
        seterr(err, err_len, "%s: header length is 0", f->path);
        return 0;
    }
    if (hlen > ST_MAX_HEADER) {
        seterr(err, err_len, "%s: header length %llu is over the limit of %llu bytes", f->path,
               (unsigned long long)hlen, (unsigned long long)ST_MAX_HEADER);
        return 0;
    }
    if (hlen > avail) {
        seterr(err, err_len, "%s: header length %llu exceeds the %llu bytes after it in the file",
               f->path, (unsigned long long)hlen, (unsigned long long)avail);
        return 0;
    }
    f->data = b + 8 + hlen;
    f->data_size = avail - hlen;
    root = json_parse((const char *)b + 8, (size_t)hlen, jerr, sizeof jerr);
    if (!root) {
        seterr(err, err_len, "%s: header: %s", f->path, jerr);
        return 0;
    }
    if (json_type_of(root) != JSON_OBJECT) {
        seterr(err, err_len, "%s: header is %s, not a JSON object", f->path, json_type_words(root));
        goto done;
    }
    nmem = json_count(root);
    for (i = 0; i < nmem; i++) {
        const char *k = json_key_at(root, i);
        size_t kl = json_key_len(root, i);
        if (strlen(k) != kl) {
            seterr(err, err_len, "%s: tensor name \"%.*s...\" holds a NUL byte", f->path,
                   NAME_MAX_SHOWN, k);
            goto done;
        }
        names_len += kl + 1; /* cannot wrap: each name is in the header */
    }
    if (!grow_tensors(m, nmem) || !(f->names = (char *)malloc(names_len ? names_len : 1))) {
        seterr(err, err_len, "%s: out of memory (or too many tensors: %lu)", f->path,
               (unsigned long)nmem);
        goto done;
    }
    for (i = 0; i < nmem; i++) {
        const char *k = json_key_at(root, i);
        size_t kl = json_key_len(root, i);
        const json_value *v = json_at(root, i);
        st_tensor *t;
        if (strcmp(k, "__metadata__") == 0) {
            size_t j;
            if (json_type_of(v) != JSON_OBJECT) {
                seterr(err, err_len, "%s: __metadata__ is %s, not an object", f->path,
                       json_type_words(v));
                goto done;
            }
            for (j = 0; j < json_count(v); j++) {
                if (json_type_of(json_at(v, j)) != JSON_STRING) {
                    seterr(err, err_len, "%s: __metadata__ \"%.*s\" is %s, not a string", f->path,
                           NAME_MAX_SHOWN, json_key_at(v, j), json_type_words(json_at(v, j)));
                    goto done;
                }
            }
            continue;
        }
        t = &m->tensors[m->count];
        memset(t, 0, sizeof *t);
        memcpy(f->names + off, k, kl + 1);
        t->name = f->names + off;
        off += kl + 1;
        t->file = fi;
        if (!parse_entry(f, t->name, v, t, err, err_len)) goto done;
        m->count++;
    }
    ok = check_overlap(f, m->tensors + first, m->count - first, err, err_len);
done:
    json_free(root);
    return ok;
}

/* ---------------------------------------------------------------- the model */
static int by_name(const void *x, const void *y) {
    return strcmp(((const st_tensor *)x)->name, ((const st_tensor *)y)->name);
}

/* Sorts the tensors by name; a name in two shards is an error. */
static int finish(st_model *m, char *err, size_t err_len) {
    int i;
    if (m->count > 1) qsort(m->tensors, (size_t)m->count, sizeof *m->tensors, by_name);
    for (i = 1; i < m->count; i++) {
        const st_tensor *a = &m->tensors[i - 1], *b = &m->tensors[i];
        if (strcmp(a->name, b->name) == 0) {
            seterr(err, err_len, "tensor \"%.*s\" is in both %s and %s", NAME_MAX_SHOWN, a->name,
                   m->files[a->file].path, m->files[b->file].path);
            return 0;
        }
    }
    return 1;
}

static int open_single(st_model *m, const char *path, char *err, size_t err_len) {
    m->files = (st_file *)calloc(1, sizeof *m->files);
    if (!m->files || !(m->files[0].path = dupstr(path, strlen(path)))) {
        seterr(err, err_len, "%s: out of memory", path);
        return 0;
    }
    m->nfiles = 1;
    return load_shard(m, 0, err, err_len) && finish(m, err, err_len);
}

static int cmp_str_ptr(const void *x, const void *y) {
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

static int find_shard(const char *const *names, int n, const char *name) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(names[mid], name);
        if (c == 0) return mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

static int open_index(st_model *m, const char *path, char *err, size_t err_len) {
    char *text = NULL, jerr[256];
    size_t len = 0, n, i, dir_len;
    json_value *root = NULL;
    const json_value *wm;
    const char **shards = NULL;
    const char *slash = strrchr(path, '/');
    int nshards = 0, ok = 0, k;
    if (!read_file(path, &text, &len, (size_t)ST_MAX_HEADER, err, err_len)) return 0;
    root = json_parse(text, len, jerr, sizeof jerr);
    if (!root) {
        seterr(err, err_len, "%s: %s", path, jerr);
        goto done;
    }
    wm = json_get(root, "weight_map");
    if (json_type_of(root) != JSON_OBJECT) {
        seterr(err, err_len, "%s: the index is %s, not a JSON object", path, json_type_words(root));
        goto done;
    }
    if (!wm) {
        seterr(err, err_len, "%s: missing \"weight_map\"", path);
        goto done;
    }
    if (json_type_of(wm) != JSON_OBJECT) {
        seterr(err, err_len, "%s: weight_map is %s, not an object", path, json_type_words(wm));
        goto done;
    }
    if (json_count(wm) == 0) {
        seterr(err, err_len, "%s: weight_map is empty", path);
        goto done;
    }
    n = json_count(wm);
    if (n > (size_t)INT_MAX / 2) {
        seterr(err, err_len, "%s: too many tensors (%lu)", path, (unsigned long)n);
        goto done;
    }
    shards = (const char **)malloc(n * sizeof *shards);
    if (!shards) {
        seterr(err, err_len, "%s: out of memory", path);
        goto done;
    }
    for (i = 0; i < n; i++) {
        const char *key = json_key_at(wm, i), *s = json_string(json_at(wm, i));
        if (strlen(key) != json_key_len(wm, i)) {
            seterr(err, err_len, "%s: weight_map: tensor name \"%.*s...\" holds a NUL byte", path,
                   NAME_MAX_SHOWN, key);
            goto done;
        }
        if (!s) {
            seterr(err, err_len, "%s: weight_map[\"%.*s\"] is %s, not a string", path,
                   NAME_MAX_SHOWN, key, json_type_words(json_at(wm, i)));
            goto done;
        }
        if (!*s || strlen(s) != json_string_len(json_at(wm, i)) || strchr(s, '/') ||
            strcmp(s, ".") == 0 || strcmp(s, "..") == 0) {
            seterr(err, err_len,
                   "%s: weight_map[\"%.*s\"]: shard name \"%.*s\" is not a file name in the "
                   "index's directory",
                   path, NAME_MAX_SHOWN, key, NAME_MAX_SHOWN, s);
            goto done;
        }
        shards[i] = s;
    }
    qsort(shards, n, sizeof *shards, cmp_str_ptr);
    for (i = 0; i < n; i++)
        if (i == 0 || strcmp(shards[i], shards[nshards - 1])) shards[nshards++] = shards[i];
    m->files = (st_file *)calloc((size_t)nshards, sizeof *m->files);
    if (!m->files) {
        seterr(err, err_len, "%s: out of memory", path);
        goto done;
    }
    m->nfiles = nshards;
    dir_len = slash ? (size_t)(slash - path) : 1;
    for (k = 0; k < nshards; k++) {
        m->files[k].path = join(slash ? path : ".", dir_len, shards[k]);
        if (!m->files[k].path) {
            seterr(err, err_len, "%s: out of memory", path);
            goto done;
        }
        if (!load_shard(m, k, err, err_len)) goto done;
    }
    if (!finish(m, err, err_len)) goto done;
    for (i = 0; i < n; i++) {
        const char *name = json_key_at(wm, i), *s = json_string(json_at(wm, i));
        const st_tensor *t = st_find(m, name);
        int want = find_shard(shards, nshards, s);
        if (!t) {
            seterr(err, err_len, "%s: tensor \"%.*s\" is not in %s, its shard in the weight_map",
                   path, NAME_MAX_SHOWN, name, m->files[want].path);
            goto done;
        }
        if (t->file != want) {
            seterr(err, err_len, "%s: tensor \"%.*s\" is in %s, not in %s as the weight_map says",
                   path, NAME_MAX_SHOWN, name, m->files[t->file].path, m->files[want].path);
            goto done;
        }
    }
    ok = 1;
done:
    free(shards);
    json_free(root);
    free(text);
    return ok;
}

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && strcmp(s + n - k, tail) == 0;
}

static int exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

st_model *st_open(const char *path, char *err, size_t err_len) {
    struct stat sb;
    st_model *m;
    int ok;
    if (err && err_len) err[0] = 0;
    if (!path || !*path) {
        seterr(err, err_len, "st_open: no path");
        return NULL;
    }
    if (stat(path, &sb) != 0) {
        seterr(err, err_len, "%s: %s", path, strerror(errno));
        return NULL;
    }
    m = (st_model *)calloc(1, sizeof *m);
    if (!m) {
        seterr(err, err_len, "%s: out of memory", path);
        return NULL;
    }
    if (S_ISDIR(sb.st_mode)) {
        size_t n = strlen(path);
        char *single = join(path, n, "model.safetensors"),
             *index = join(path, n, "model.safetensors.index.json");
        if (!single || !index) {
            seterr(err, err_len, "%s: out of memory", path);
            ok = 0;
        } else if (exists(single)) {
            ok = open_single(m, single, err, err_len);
        } else if (exists(index)) {
            ok = open_index(m, index, err, err_len);
        } else {
            seterr(
                err, err_len,
                "%s: neither model.safetensors nor model.safetensors.index.json in this directory",
                path);
            ok = 0;
        }
        free(single);
        free(index);
    } else if (ends_with(path, ".json")) {
        ok = open_index(m, path, err, err_len);
    } else {
        ok = open_single(m, path, err, err_len);
    }
    if (!ok) {
        st_close(m);
        return NULL;
    }
    return m;
}

void st_close(st_model *m) {
    int i;
    if (!m) return;
    for (i = 0; i < m->nfiles; i++) {
        if (m->files[i].map) munmap(m->files[i].map, m->files[i].map_size);
        free(m->files[i].path);
        free(m->files[i].names);
    }
    free(m->files);
    free(m->tensors);
    free(m);
}

int st_count(const st_model *m) { return m ? m->count : 0; }

const st_tensor *st_tensor_at(const st_model *m, int i) {
    return m && i >= 0 && i < m->count ? &m->tensors[i] : NULL;
}

const st_tensor *st_find(const st_model *m, const char *name) {
    int lo = 0, hi;
    if (!m || !name) return NULL;
    hi = m->count;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(m->tensors[mid].name, name);
        if (c == 0) return &m->tensors[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const void *st_data(const st_model *m, const st_tensor *t) {
    if (!m || !t || t->file < 0 || t->file >= m->nfiles) return NULL;
    return m->files[t->file].data + t->begin;
}

int st_file_count(const st_model *m) { return m ? m->nfiles : 0; }

const char *st_file_path(const st_model *m, int file) {
    return m && file >= 0 && file < m->nfiles ? m->files[file].path : NULL;
}

const void *st_expect(const st_model *m, const char *name, st_dtype dtype, int ndim,
                      const int64_t *shape, char *err, size_t err_len) {
    const st_tensor *t;
    int i, same;
    char got[256], want[256];
    if (err && err_len) err[0] = 0;
    if (!name) {
        seterr(err, err_len, "st_expect: no name");
        return NULL;
    }
    if (ndim < 0 || ndim > ST_MAX_DIMS || (ndim > 0 && !shape)) {
        seterr(err, err_len, "%.*s: st_expect: ndim = %d (0 to %d, with a shape)", NAME_MAX_SHOWN,
               name, ndim, ST_MAX_DIMS);
        return NULL;
    }
    t = st_find(m, name);
    if (!t) {
        seterr(err, err_len, "%.*s: not in the model", NAME_MAX_SHOWN, name);
        return NULL;
    }
    if (t->dtype != dtype) {
        seterr(err, err_len, "%.*s: dtype %s, expected %s", NAME_MAX_SHOWN, name,
               st_dtype_name(t->dtype), st_dtype_name(dtype));
        return NULL;
    }
    same = t->ndim == ndim;
    for (i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same) {
        fmt_shape(got, sizeof got, t->ndim, t->shape);
        fmt_shape(want, sizeof want, ndim, shape);
        seterr(err, err_len, "%.*s: shape %s, expected %s", NAME_MAX_SHOWN, name, got, want);
        return NULL;
    }
    return st_data(m, t);
}
