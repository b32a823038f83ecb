/* examples/safetensors.c: a valid file and a valid sharded model (by file, by directory, by
   index), every header check (length, JSON, fields, dtype, shape, offsets, sizes, overflow,
   overlap), every index check (missing shard, tensor not in its shard, shard names that leave
   the directory), st_expect's messages, and a small file truncated at every byte and with every
   header byte flipped: a clean error or a consistent model, never a crash. Files are written
   under a mkdtemp directory that is removed afterwards. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
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

#include "../../examples/safetensors.h"

static char dir[64];
static char err[1024];

#define assert_contains(s, sub)                                                                    \
    do {                                                                                           \
        if (!strstr((s), (sub))) fail_msg("\"%s\" not in message \"%s\"", (sub), (s));             \
    } while (0)

/* ---------------------------------------------------------------- files */
static const char *at(const char *name) {
    static char path[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/%s", dir, name);
    return path[k];
}

static void write_bytes(const char *name, const void *p, size_t n) {
    FILE *f = fopen(at(name), "wb");
    if (!f) fail_msg("cannot write %s", at(name));
    if (n && fwrite(p, 1, n, f) != n) fail_msg("short write %s", at(name));
    fclose(f);
}

/* A safetensors image: length (hlen, or the header's length when hlen is -1), header, data. */
static size_t build(unsigned char *out, size_t cap, int64_t hlen, const char *header,
                    const void *data, size_t n) {
    size_t h = strlen(header), i;
    uint64_t len = hlen < 0 ? (uint64_t)h : (uint64_t)hlen;
    if (8 + h + n > cap) fail_msg("test image too big");
    for (i = 0; i < 8; i++) out[i] = (unsigned char)(len >> (8 * i));
    memcpy(out + 8, header, h);
    if (n) memcpy(out + 8 + h, data, n);
    return 8 + h + n;
}

static void write_st(const char *name, int64_t hlen, const char *header, const void *data,
                     size_t n) {
    static unsigned char img[1 << 16];
    write_bytes(name, img, build(img, sizeof img, hlen, header, data, n));
}

static unsigned char pattern[256]; /* pattern[i] = i */

static void remove_tree(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            char sub[512];
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            remove_tree(sub);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static int setup(void **state) {
    int i;
    (void)state;
    for (i = 0; i < 256; i++) pattern[i] = (unsigned char)i;
    strcpy(dir, "/tmp/talon-ex-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    remove_tree(dir);
    return 0;
}

/* Opens, which must fail, and checks the message. */
static void open_fails(const char *path, const char *msg) {
    st_model *m = st_open(path, err, sizeof err);
    if (m) {
        st_close(m);
        fail_msg("%s opened, expected \"%s\"", path ? path : "(null)", msg);
    }
    assert_contains(err, msg);
}

/* ---------------------------------------------------------------- a valid file */
#define VALID_HEADER                                                                               \
    "{\"__metadata__\":{\"format\":\"pt\"},"                                                       \
    "\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[28,36]},"                             \
    "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[12,28]},"                            \
    "\"c\":{\"dtype\":\"I8\",\"shape\":[0,5],\"data_offsets\":[28,28]},"                           \
    "\"a\":{\"shape\":[2,3],\"data_offsets\":[0,12],\"dtype\":\"BF16\"}}    "
#define VALID_DATA 36

static void test_valid_file(void **state) {
    st_model *m;
    const st_tensor *t;
    (void)state;
    write_st("valid.safetensors", -1, VALID_HEADER, pattern, VALID_DATA);
    m = st_open(at("valid.safetensors"), err, sizeof err);
    if (!m) fail_msg("%s", err);
    assert_string_equal(err, "");
    assert_int_equal(st_count(m), 4);
    assert_int_equal(st_file_count(m), 1);
    assert_string_equal(st_file_path(m, 0), at("valid.safetensors"));
    assert_null(st_file_path(m, 1));
    /* sorted by name */
    assert_string_equal(st_tensor_at(m, 0)->name, "a");
    assert_string_equal(st_tensor_at(m, 1)->name, "b");
    assert_string_equal(st_tensor_at(m, 2)->name, "c");
    assert_string_equal(st_tensor_at(m, 3)->name, "s");
    assert_null(st_tensor_at(m, 4));
    assert_null(st_tensor_at(m, -1));
    t = st_find(m, "a");
    assert_non_null(t);
    assert_int_equal(t->dtype, ST_BF16);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], 2);
    assert_int_equal(t->shape[1], 3);
    assert_int_equal(t->begin, 0);
    assert_int_equal(t->end, 12);
    assert_int_equal(t->file, 0);
    assert_memory_equal(st_data(m, t), pattern, 12);
    t = st_find(m, "b");
    assert_int_equal(t->dtype, ST_F32);
    assert_memory_equal(st_data(m, t), pattern + 12, 16);
    t = st_find(m, "c");
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->begin, t->end);
    t = st_find(m, "s");
    assert_int_equal(t->ndim, 0);
    assert_memory_equal(st_data(m, t), pattern + 28, 8);
    assert_null(st_find(m, "__metadata__"));
    assert_null(st_find(m, "z"));
    assert_null(st_find(m, ""));
    assert_null(st_find(m, NULL));
    assert_null(st_data(m, NULL));
    st_close(m);
    /* NULL everywhere */
    st_close(NULL);
    assert_int_equal(st_count(NULL), 0);
    assert_null(st_find(NULL, "a"));
    assert_null(st_tensor_at(NULL, 0));
    open_fails(NULL, "no path");
    assert_null(st_open("", NULL, 0));
}

static void test_dtypes(void **state) {
    static const struct {
        st_dtype d;
        const char *name;
        size_t size;
    } rows[] = {
        {ST_BOOL, "BOOL", 1}, {ST_U8, "U8", 1},           {ST_I8, "I8", 1},
        {ST_I16, "I16", 2},   {ST_I32, "I32", 4},         {ST_I64, "I64", 8},
        {ST_F16, "F16", 2},   {ST_BF16, "BF16", 2},       {ST_F32, "F32", 4},
        {ST_F64, "F64", 8},   {ST_F8_E4M3, "F8_E4M3", 1}, {ST_F8_E5M2, "F8_E5M2", 1},
    };
    size_t k;
    (void)state;
    for (k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        char header[128];
        st_model *m;
        assert_string_equal(st_dtype_name(rows[k].d), rows[k].name);
        assert_int_equal(st_dtype_size(rows[k].d), rows[k].size);
        /* each name is read back from a file */
        snprintf(header, sizeof header,
                 "{\"t\":{\"dtype\":\"%s\",\"shape\":[3],\"data_offsets\":[0,%lu]}}", rows[k].name,
                 (unsigned long)(3 * rows[k].size));
        write_st("dtype.safetensors", -1, header, pattern, 3 * rows[k].size);
        m = st_open(at("dtype.safetensors"), err, sizeof err);
        if (!m) fail_msg("%s: %s", rows[k].name, err);
        assert_int_equal(st_find(m, "t")->dtype, rows[k].d);
        st_close(m);
    }
    assert_string_equal(st_dtype_name((st_dtype)99), "?");
    assert_int_equal(st_dtype_size((st_dtype)99), 0);
}

/* ---------------------------------------------------------------- header errors */
typedef struct hdr_row {
    const char *name, *header;
    size_t data;  /* bytes of pattern after the header */
    int64_t hlen; /* -1: the header's length; -2: 2^64 - 1 */
    const char *msg;
} hdr_row;

#define T(body) "{\"t\":" body "}"
static const hdr_row hdr_rows[] = {
    {"header length 0", "", 0, -1, "header length is 0"},
    {"header length 0 before data", "{}", 0, 0, "header length is 0"},
    {"header length past the file", "{}", 4, 1000,
     "header length 1000 exceeds the 6 bytes after it in the file"},
    {"header length one past the file", "{}", 0, 3, "header length 3 exceeds the 2 bytes"},
    {"header length over 100 MB", "{}", 0, 100000001,
     "header length 100000001 is over the limit of 100000000 bytes"},
    {"header length 2^64 - 1", "{}", 0, -2, "header length 18446744073709551615 is over the limit"},
    {"header not JSON", "not json", 0, -1,
     "header: json: line 1 column 1: expected a value (found 'n')"},
    {"header cut JSON", "{\"t\":{\"dtype\":", 0, -1,
     "header: json: line 1 column 15: expected a value (found end of input)"},
    {"header an array", "[]", 0, -1, "header is an array, not a JSON object"},
    {"header a string", "\"x\"", 0, -1, "header is a string, not a JSON object"},
    {"header with a NUL byte", "{\"t\\u0000x\":{}}", 0, -1,
     "tensor name \"t...\" holds a NUL byte"},
    {"duplicate tensor", "{\"t\":{},\"t\":{}}", 0, -1,
     "header: json: line 1 column 9: duplicate key \"t\""},
    {"entry not an object", T("5"), 0, -1, "tensor \"t\": entry is a number, not an object"},
    {"missing dtype", T("{\"shape\":[1],\"data_offsets\":[0,1]}"), 1, -1,
     "tensor \"t\": missing \"dtype\""},
    {"missing shape", T("{\"dtype\":\"U8\",\"data_offsets\":[0,1]}"), 1, -1,
     "tensor \"t\": missing \"shape\""},
    {"missing data_offsets", T("{\"dtype\":\"U8\",\"shape\":[1]}"), 1, -1,
     "tensor \"t\": missing \"data_offsets\""},
    {"extra field", T("{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"foo\":1}"), 1, -1,
     "tensor \"t\": unexpected field \"foo\""},
    {"dtype not a string", T("{\"dtype\":2,\"shape\":[1],\"data_offsets\":[0,1]}"), 1, -1,
     "tensor \"t\": dtype is a number, not a string"},
    {"unknown dtype", T("{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,1]}"), 1, -1,
     "tensor \"t\": dtype \"Q4\" is not supported"},
    {"lowercase dtype", T("{\"dtype\":\"bf16\",\"shape\":[1],\"data_offsets\":[0,2]}"), 2, -1,
     "dtype \"bf16\" is not supported"},
    {"unsupported dtype U16", T("{\"dtype\":\"U16\",\"shape\":[1],\"data_offsets\":[0,2]}"), 2, -1,
     "dtype \"U16\" is not supported"},
    {"dtype with a NUL", T("{\"dtype\":\"U8\\u0000\",\"shape\":[1],\"data_offsets\":[0,1]}"), 1, -1,
     "dtype \"U8\" is not supported"},
    {"shape not an array", T("{\"dtype\":\"U8\",\"shape\":1,\"data_offsets\":[0,1]}"), 1, -1,
     "tensor \"t\": shape is a number, not an array"},
    {"shape negative", T("{\"dtype\":\"U8\",\"shape\":[2,-1],\"data_offsets\":[0,0]}"), 0, -1,
     "tensor \"t\": shape[1] is not a non-negative integer"},
    {"shape fractional", T("{\"dtype\":\"U8\",\"shape\":[1.5],\"data_offsets\":[0,1]}"), 1, -1,
     "shape[0] is not a non-negative integer"},
    {"shape string", T("{\"dtype\":\"U8\",\"shape\":[\"1\"],\"data_offsets\":[0,1]}"), 1, -1,
     "shape[0] is not a non-negative integer"},
    {"shape past int64",
     T("{\"dtype\":\"U8\",\"shape\":[9223372036854775808],\"data_offsets\":[0,1]}"), 1, -1,
     "shape[0] is not a non-negative integer"},
    {"rank 9", T("{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}"), 1, -1,
     "tensor \"t\": rank 9 exceeds 8"},
    {"offsets not an array", T("{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":0}"), 1, -1,
     "tensor \"t\": data_offsets is not an array of 2 non-negative integers"},
    {"one offset", T("{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0]}"), 1, -1,
     "data_offsets is not an array of 2"},
    {"three offsets", T("{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}"), 1, -1,
     "data_offsets is not an array of 2"},
    {"negative offset", T("{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[-1,0]}"), 1, -1,
     "data_offsets is not an array of 2"},
    {"string offset", T("{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[\"0\",1]}"), 1, -1,
     "data_offsets is not an array of 2"},
    {"begin past end", T("{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,2]}"), 8, -1,
     "tensor \"t\": data_offsets [4, 2] begin past end"},
    {"end past the data", T("{\"dtype\":\"U8\",\"shape\":[100],\"data_offsets\":[0,100]}"), 12, -1,
     "tensor \"t\": data_offsets [0, 100] end past the data section (12 bytes)"},
    {"end huge", T("{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,9223372036854775807]}"), 1,
     -1, "end past the data section (1 bytes)"},
    {"size smaller than the shape",
     T("{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,8]}"), 12, -1,
     "tensor \"t\": data_offsets [0, 8] hold 8 bytes, shape [2, 3] of BF16 needs 12"},
    {"size larger than the shape", T("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,12]}"),
     12, -1, "hold 12 bytes, shape [2] of F32 needs 8"},
    {"empty shape with bytes", T("{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,1]}"), 1, -1,
     "hold 1 bytes, shape [0] of U8 needs 0"},
    {"scalar without bytes", T("{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[0,0]}"), 0, -1,
     "hold 0 bytes, shape [] of I32 needs 4"},
    {"element count overflows",
     T("{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,0]}"), 0,
     -1,
     "tensor \"t\": shape [4294967296, 4294967296, 4294967296] of U8 has more bytes than fit in 64 "
     "bits"},
    {"byte count overflows",
     T("{\"dtype\":\"F32\",\"shape\":[2305843009213693952,2],\"data_offsets\":[0,0]}"), 0, -1,
     "shape [2305843009213693952, 2] of F32 has more bytes than fit in 64 bits"},
    {"count wraps to a small size",
     T("{\"dtype\":\"U8\",\"shape\":[4294967296,4294967297],\"data_offsets\":[0,0]}"), 0, -1,
     "has more bytes than fit in 64 bits"},
    {"overlap",
     "{\"a\":{\"dtype\":\"BF16\",\"shape\":[6],\"data_offsets\":[0,12]},\"b\":{\"dtype\":\"F32\","
     "\"shape\":[4],\"data_offsets\":[8,24]}}",
     24, -1, "tensors \"a\" [0, 12) and \"b\" [8, 24) overlap"},
    {"one inside another",
     "{\"big\":{\"dtype\":\"U8\",\"shape\":[24],\"data_offsets\":[0,24]},\"a\":{\"dtype\":\"U8\","
     "\"shape\":[2],\"data_offsets\":[2,4]},"
     "\"z\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[16,18]}}",
     24, -1, "tensors \"big\" [0, 24) and \"a\" [2, 4) overlap"},
    {"same range",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]},\"b\":{\"dtype\":\"I32\","
     "\"shape\":[1],\"data_offsets\":[4,8]}}",
     8, -1, "[4, 8) overlap"},
    {"metadata not an object", "{\"__metadata__\":[]}", 0, -1,
     "__metadata__ is an array, not an object"},
    {"metadata value not a string", "{\"__metadata__\":{\"format\":1}}", 0, -1,
     "__metadata__ \"format\" is a number, not a string"},
};

static void test_header_error(void **state) {
    const hdr_row *r = (const hdr_row *)*state;
    static unsigned char img[1024];
    size_t n = build(img, sizeof img, r->hlen == -2 ? -1 : r->hlen, r->header, pattern, r->data);
    if (r->hlen == -2) memset(img, 0xff, 8); /* -2: a length of 2^64 - 1 */
    write_bytes("bad.safetensors", img, n);
    open_fails(at("bad.safetensors"), r->msg);
    assert_contains(err, at("bad.safetensors"));
}

/* Valid corner cases: empty header object, zero-sized tensors anywhere, gaps, a scalar. */
static void test_header_corners(void **state) {
    static const struct {
        const char *header;
        size_t data;
        int count;
    } rows[] = {
        {"{}", 0, 0},
        {"{\"__metadata__\":{}}", 0, 0},
        {"{\"__metadata__\":{}}", 7, 0}, /* unused data */
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},\"e\":{\"dtype\":\"F32\","
         "\"shape\":[3,0],\"data_offsets\":[2,2]}}",
         4, 2},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[6,8]},\"b\":{\"dtype\":\"U8\","
         "\"shape\":[2],\"data_offsets\":[0,2]}}",
         8, 2},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[0,4611686018427387904,4611686018427387904],\"data_"
         "offsets\":[0,0]}}",
         0, 1},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1, 1},
        {"{\"a\":{\"dtype\":\"I64\",\"shape\":[1.0],\"data_offsets\":[0,8e0]}}", 8, 1},
        {" \n{\"\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}\n  ", 1, 1},
    };
    size_t k;
    (void)state;
    for (k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        st_model *m;
        write_st("corner.safetensors", -1, rows[k].header, pattern, rows[k].data);
        m = st_open(at("corner.safetensors"), err, sizeof err);
        if (!m) fail_msg("row %lu: %s", (unsigned long)k, err);
        assert_int_equal(st_count(m), rows[k].count);
        st_close(m);
    }
}

static void test_file_errors(void **state) {
    (void)state;
    write_bytes("empty.safetensors", "", 0);
    open_fails(at("empty.safetensors"), "0 bytes, too short for a safetensors file");
    write_bytes("short.safetensors", "\x02\0\0\0\0", 5);
    open_fails(at("short.safetensors"), "5 bytes, too short");
    open_fails(at("missing.safetensors"), "missing.safetensors: No such file or directory");
    assert_int_equal(mkfifo(at("fifo.safetensors"), 0600), 0); /* must not block */
    open_fails(at("fifo.safetensors"), "fifo.safetensors: not a regular file");
    mkdir(at("emptydir"), 0700);
    open_fails(
        at("emptydir"),
        "emptydir: neither model.safetensors nor model.safetensors.index.json in this directory");
    mkdir(at("emptydir/model.safetensors"), 0700); /* a directory where the file should be */
    open_fails(at("emptydir"), "model.safetensors: not a regular file");
}

/* A directory with model.safetensors opens it (and prefers it to an index). */
static void test_directory(void **state) {
    st_model *m;
    (void)state;
    mkdir(at("single"), 0700);
    write_st("single/model.safetensors", -1, VALID_HEADER, pattern, VALID_DATA);
    write_bytes("single/model.safetensors.index.json", "garbage", 7);
    m = st_open(at("single"), err, sizeof err);
    if (!m) fail_msg("%s", err);
    assert_int_equal(st_count(m), 4);
    assert_string_equal(st_file_path(m, 0), at("single/model.safetensors"));
    st_close(m);
    m = st_open(at("single/"), err, sizeof err); /* trailing slash */
    if (!m) fail_msg("%s", err);
    st_close(m);
}

/* ---------------------------------------------------------------- truncation and flips */
static void check_consistent(const st_model *m, size_t file_size) {
    int i;
    for (i = 0; i < st_count(m); i++) {
        const st_tensor *t = st_tensor_at(m, i);
        uint64_t n = st_dtype_size(t->dtype), sum = 0, k;
        const unsigned char *p = (const unsigned char *)st_data(m, t);
        int d;
        assert_true(t->begin <= t->end && t->end <= file_size);
        assert_true(t->ndim >= 0 && t->ndim <= 8);
        for (d = 0; d < t->ndim; d++) n *= (uint64_t)t->shape[d];
        assert_true(n == t->end - t->begin);
        for (k = 0; k < n; k++) sum += p[k]; /* reads every byte */
        (void)sum;
        if (i) assert_true(strcmp(st_tensor_at(m, i - 1)->name, t->name) < 0);
    }
}

static void test_truncated(void **state) {
    static unsigned char img[1024];
    size_t n = build(img, sizeof img, -1, VALID_HEADER, pattern, VALID_DATA), cut;
    (void)state;
    for (cut = 0; cut < n; cut++) {
        char why[64];
        write_bytes("cut.safetensors", img, cut);
        snprintf(why, sizeof why, "cut at %lu of %lu", (unsigned long)cut, (unsigned long)n);
        {
            st_model *m = st_open(at("cut.safetensors"), err, sizeof err);
            if (m) {
                st_close(m);
                fail_msg("%s: opened", why);
            }
            if (strncmp(err, at("cut.safetensors"), strlen(at("cut.safetensors"))) != 0)
                fail_msg("%s: message \"%s\" does not name the file", why, err);
        }
    }
    write_bytes("cut.safetensors", img, n);
    {
        st_model *m = st_open(at("cut.safetensors"), err, sizeof err);
        if (!m) fail_msg("whole file: %s", err);
        st_close(m);
    }
}

static void test_flipped(void **state) {
    static unsigned char img[1024], buf[1024];
    static const unsigned char flips[] = {0x00, '"', '}', ']', ',',  '0',
                                          '9',  '-', '.', 'e', 0xff, ' '};
    size_t n = build(img, sizeof img, -1, VALID_HEADER, pattern, VALID_DATA), k, f, opened = 0;
    (void)state;
    for (k = 0; k < n - VALID_DATA; k++) {
        for (f = 0; f < sizeof flips + 1; f++) {
            st_model *m;
            memcpy(buf, img, n);
            buf[k] = f < sizeof flips ? flips[f] : (unsigned char)(buf[k] ^ 0x01);
            write_bytes("flip.safetensors", buf, n);
            m = st_open(at("flip.safetensors"), err, sizeof err);
            if (m) {
                check_consistent(m, n);
                opened++;
                st_close(m);
            } else if (!err[0]) {
                fail_msg("byte %lu: no message", (unsigned long)k);
            }
        }
    }
    assert_true(opened > 0); /* some flips (spaces, digits in padding) stay valid */
}

/* ---------------------------------------------------------------- sharded models */
#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"
#define SHARD1_HEADER                                                                              \
    "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"                              \
    "\"b\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[4,8]}}"
#define SHARD2_HEADER "{\"c\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8]}}"

/* dir/name/ with the two shards and the given index. */
static void make_sharded(const char *name, const char *index) {
    char p[128];
    mkdir(at(name), 0700);
    snprintf(p, sizeof p, "%s/" SHARD1, name);
    write_st(p, -1, SHARD1_HEADER, pattern, 8);
    snprintf(p, sizeof p, "%s/" SHARD2, name);
    write_st(p, -1, SHARD2_HEADER, pattern + 100, 8);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", name);
    write_bytes(p, index, strlen(index));
}

#define INDEX(wm) "{\"metadata\": {\"total_size\": 24}, \"weight_map\": {" wm "}}"
#define GOOD_WM "\"a\": \"" SHARD1 "\", \"b\": \"" SHARD1 "\", \"c\": \"" SHARD2 "\""

static void test_sharded(void **state) {
    st_model *m;
    const st_tensor *t;
    const char *paths[2];
    int k;
    (void)state;
    make_sharded("sharded", INDEX(GOOD_WM));
    paths[0] = at("sharded");
    paths[1] = at("sharded/model.safetensors.index.json");
    for (k = 0; k < 2; k++) {
        m = st_open(paths[k], err, sizeof err);
        if (!m) fail_msg("%s: %s", paths[k], err);
        assert_int_equal(st_count(m), 3);
        assert_int_equal(st_file_count(m), 2);
        assert_string_equal(st_file_path(m, 0), at("sharded/" SHARD1));
        assert_string_equal(st_file_path(m, 1), at("sharded/" SHARD2));
        t = st_find(m, "a");
        assert_int_equal(t->file, 0);
        assert_memory_equal(st_data(m, t), pattern, 4);
        t = st_find(m, "b");
        assert_int_equal(t->file, 0);
        assert_memory_equal(st_data(m, t), pattern + 4, 4);
        t = st_find(m, "c");
        assert_int_equal(t->file, 1);
        assert_int_equal(t->dtype, ST_F32);
        assert_memory_equal(st_data(m, t), pattern + 100, 8);
        st_close(m);
    }
    /* A shard tensor the weight_map does not name is listed too. */
    make_sharded("partial", INDEX("\"a\": \"" SHARD1 "\", \"c\": \"" SHARD2 "\""));
    m = st_open(at("partial"), err, sizeof err);
    if (!m) fail_msg("%s", err);
    assert_int_equal(st_count(m), 3);
    assert_non_null(st_find(m, "b"));
    st_close(m);
    /* An index given by a relative path with no directory part. */
    {
        char cwd[512];
        assert_non_null(getcwd(cwd, sizeof cwd));
        assert_int_equal(chdir(at("sharded")), 0);
        m = st_open("model.safetensors.index.json", err, sizeof err);
        assert_int_equal(chdir(cwd), 0);
        if (!m) fail_msg("%s", err);
        assert_string_equal(st_file_path(m, 0), "./" SHARD1);
        st_close(m);
    }
}

typedef struct index_row {
    const char *name, *index, *msg;
} index_row;

static const index_row index_rows[] = {
    {"index not JSON",
     "{\"weight_map\": ", "model.safetensors.index.json: json: line 1 column 16: expected a value"},
    {"index an array", "[]", "the index is an array, not a JSON object"},
    {"no weight_map", "{\"metadata\": {}}", "missing \"weight_map\""},
    {"weight_map an array", "{\"weight_map\": []}", "weight_map is an array, not an object"},
    {"weight_map empty", "{\"weight_map\": {}}", "weight_map is empty"},
    {"shard name not a string", INDEX("\"a\": 1"), "weight_map[\"a\"] is a number, not a string"},
    {"missing shard", INDEX(GOOD_WM ", \"d\": \"model-00003-of-00003.safetensors\""),
     "model-00003-of-00003.safetensors: No such file or directory"},
    {"tensor missing from its shard", INDEX(GOOD_WM ", \"d\": \"" SHARD2 "\""),
     "tensor \"d\" is not in "},
    {"tensor in the other shard",
     INDEX("\"a\": \"" SHARD2 "\", \"b\": \"" SHARD1 "\", \"c\": \"" SHARD2 "\""),
     SHARD1 ", not in "},
    {"a shard the weight_map does not name is not opened",
     INDEX("\"a\": \"" SHARD1 "\", \"c\": \"" SHARD1 "\""), "tensor \"c\" is not in "},
    {"shard name ../x", INDEX("\"a\": \"../x.safetensors\""),
     "weight_map[\"a\"]: shard name \"../x.safetensors\" is not a file name in the index's "
     "directory"},
    {"shard name ..", INDEX("\"a\": \"..\""), "shard name \"..\" is not a file name"},
    {"shard name .", INDEX("\"a\": \".\""), "shard name \".\" is not a file name"},
    {"shard name empty", INDEX("\"a\": \"\""), "shard name \"\" is not a file name"},
    {"shard name with a slash", INDEX("\"a\": \"sub/" SHARD1 "\""),
     "shard name \"sub/" SHARD1 "\" is not a file name"},
    {"shard name absolute", INDEX("\"a\": \"/etc/passwd\""),
     "shard name \"/etc/passwd\" is not a file name"},
    {"shard name with a NUL", INDEX("\"a\": \"" SHARD1 "\\u0000x\""), "is not a file name"},
    {"tensor name with a NUL", INDEX("\"a\\u0000\": \"" SHARD1 "\""),
     "tensor name \"a...\" holds a NUL byte"},
    {"shard is the index", INDEX("\"a\": \"model.safetensors.index.json\""),
     "model.safetensors.index.json: header length"},
};

static void test_index_error(void **state) {
    const index_row *r = (const index_row *)*state;
    make_sharded("bad-index", r->index);
    open_fails(at("bad-index"), r->msg);
}

/* The same tensor in two shards; a broken shard's own error comes through. */
static void test_shard_errors(void **state) {
    (void)state;
    make_sharded("twice", INDEX(GOOD_WM));
    write_st("twice/" SHARD2, -1,
             "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
             "\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
             pattern, 8);
    open_fails(at("twice"), "tensor \"a\" is in both");
    make_sharded("broken", INDEX(GOOD_WM));
    write_st("broken/" SHARD2, -1,
             "{\"c\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,9]}}", pattern, 9);
    open_fails(at("broken"), SHARD2 ": tensor \"c\": data_offsets [0, 9] hold 9 bytes");
    write_bytes("broken/" SHARD2, "", 0);
    open_fails(at("broken"), SHARD2 ": 0 bytes, too short");
}

/* ---------------------------------------------------------------- st_expect */
static void test_expect(void **state) {
    static const int64_t s23[] = {2, 3}, s32[] = {3, 2}, s6[] = {6}, s4[] = {4};
    st_model *m;
    (void)state;
    write_st("expect.safetensors", -1, VALID_HEADER, pattern, VALID_DATA);
    m = st_open(at("expect.safetensors"), err, sizeof err);
    assert_non_null(m);
    assert_ptr_equal(st_expect(m, "a", ST_BF16, 2, s23, err, sizeof err),
                     st_data(m, st_find(m, "a")));
    assert_ptr_equal(st_expect(m, "b", ST_F32, 1, s4, err, sizeof err),
                     st_data(m, st_find(m, "b")));
    assert_non_null(st_expect(m, "s", ST_F64, 0, NULL, err, sizeof err));
    assert_null(st_expect(m, "a", ST_BF16, 2, s32, err, sizeof err));
    assert_string_equal(err, "a: shape [2, 3], expected [3, 2]");
    assert_null(st_expect(m, "a", ST_BF16, 1, s6, err, sizeof err));
    assert_string_equal(err, "a: shape [2, 3], expected [6]");
    assert_null(st_expect(m, "s", ST_F64, 1, s6, err, sizeof err));
    assert_string_equal(err, "s: shape [], expected [6]");
    assert_null(st_expect(m, "a", ST_F16, 2, s23, err, sizeof err));
    assert_string_equal(err, "a: dtype BF16, expected F16");
    assert_null(
        st_expect(m, "model.layers.0.self_attn.q_proj.weight", ST_BF16, 2, s23, err, sizeof err));
    assert_string_equal(err, "model.layers.0.self_attn.q_proj.weight: not in the model");
    assert_null(st_expect(m, "a", ST_BF16, 9, s23, err, sizeof err));
    assert_contains(err, "ndim = 9");
    assert_null(st_expect(m, "a", ST_BF16, 2, NULL, err, sizeof err));
    assert_null(st_expect(m, NULL, ST_BF16, 2, s23, err, sizeof err));
    assert_null(st_expect(NULL, "a", ST_BF16, 2, s23, err, sizeof err));
    assert_string_equal(err, "a: not in the model");
    assert_null(st_expect(m, "a", ST_BF16, 2, s32, NULL, 0));
    st_close(m);
}

/* ---------------------------------------------------------------- registration */
#include "registry.h"

int main(void) {
    size_t i;
    ADD(test_valid_file);
    ADD(test_dtypes);
    for (i = 0; i < sizeof hdr_rows / sizeof hdr_rows[0]; i++)
        add(hdr_rows[i].name, test_header_error, &hdr_rows[i]);
    ADD(test_header_corners);
    ADD(test_file_errors);
    ADD(test_directory);
    ADD(test_truncated);
    ADD(test_flipped);
    ADD(test_sharded);
    for (i = 0; i < sizeof index_rows / sizeof index_rows[0]; i++)
        add(index_rows[i].name, test_index_error, &index_rows[i]);
    ADD(test_shard_errors);
    ADD(test_expect);
    return _cmocka_run_group_tests("safetensors", tests, ntests, setup, teardown);
}
