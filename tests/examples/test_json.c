/* examples/json.c: valid documents and every accessor, numbers read exactly, strings decoded
   (escapes, surrogate pairs, invalid UTF-8 passed through), every error with its line and
   column, the depth limit, duplicate keys, and a fuzz loop (every truncation of a document,
   every byte flipped to a few values) that must never crash or leak. */
#include <locale.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../examples/json.h"

static char err[512];

#define assert_contains(s, sub)                                                                    \
    do {                                                                                           \
        if (!strstr((s), (sub))) fail_msg("\"%s\" not in message \"%s\"", (sub), (s));             \
    } while (0)

static json_value *parse(const char *s) { return json_parse(s, strlen(s), err, sizeof err); }

/* Parses s, which must fail; returns the message. */
static const char *parse_fails(const char *s, size_t len) {
    json_value *v = json_parse(s, len, err, sizeof err);
    if (v) {
        json_free(v);
        fail_msg("parsed, expected an error: %s", s);
    }
    if (strncmp(err, "json: ", 6) != 0)
        fail_msg("message \"%s\" does not start with \"json: \"", err);
    return err;
}

/* ---------------------------------------------------------------- valid documents */
static void test_document(void **state) {
    const char *doc =
        "{\"a\": [1, -2.5, \"x\", true, false, null, {\"b\": {}}, []],\n"
        " \"n\": 1e3, \"s\": \"h\\u00e9\\ud83d\\ude00\\n\", \"empty\": \"\", \"z\": {\"k\": 7}}";
    json_value *v = parse(doc);
    const json_value *a, *x;
    double d = 0;
    int64_t i = 0;
    int b = 0;
    (void)state;
    if (!v) fail_msg("%s", err);
    assert_int_equal(json_type_of(v), JSON_OBJECT);
    assert_int_equal(json_count(v), 5);
    assert_string_equal(json_key_at(v, 0), "a");
    assert_string_equal(json_key_at(v, 1), "n");
    assert_string_equal(json_key_at(v, 4), "z");
    assert_null(json_key_at(v, 5));
    assert_ptr_equal(json_at(v, 1), json_get(v, "n"));
    a = json_get(v, "a");
    assert_int_equal(json_type_of(a), JSON_ARRAY);
    assert_int_equal(json_count(a), 8);
    assert_true(json_int64(json_at(a, 0), &i));
    assert_int_equal(i, 1);
    assert_true(json_number(json_at(a, 1), &d));
    assert_true(d == -2.5);
    assert_false(json_int64(json_at(a, 1), &i));
    assert_string_equal(json_string(json_at(a, 2)), "x");
    assert_true(json_bool(json_at(a, 3), &b));
    assert_int_equal(b, 1);
    assert_true(json_bool(json_at(a, 4), &b));
    assert_int_equal(b, 0);
    assert_int_equal(json_type_of(json_at(a, 5)), JSON_NULL);
    x = json_get(json_at(a, 6), "b");
    assert_int_equal(json_type_of(x), JSON_OBJECT);
    assert_int_equal(json_count(x), 0);
    assert_null(json_at(x, 0));
    assert_null(json_get(x, "b"));
    assert_int_equal(json_type_of(json_at(a, 7)), JSON_ARRAY);
    assert_int_equal(json_count(json_at(a, 7)), 0);
    assert_null(json_at(a, 8));
    assert_true(json_int64(json_get(v, "n"), &i));
    assert_int_equal(i, 1000);
    assert_string_equal(json_string(json_get(v, "s")), "h\xc3\xa9\xf0\x9f\x98\x80\n");
    assert_int_equal(json_string_len(json_get(v, "s")), 8);
    assert_string_equal(json_string(json_get(v, "empty")), "");
    assert_true(json_int64(json_get(json_get(v, "z"), "k"), &i));
    assert_int_equal(i, 7);
    assert_null(json_get(v, "missing"));
    assert_null(json_get(v, "ns")); /* a prefix and an extension of keys are not keys */
    assert_null(json_get(v, "emptyx"));
    json_free(v);
}

/* Any value may be the document; whitespace around it is fine. */
static void test_scalars(void **state) {
    static const char *docs[] = {"1",  " \t\r\n\"s\"\n", "true", "false", "null", "[]",
                                 "{}", "-0.5e-3 "};
    static const json_type types[] = {JSON_NUMBER, JSON_STRING, JSON_BOOL,   JSON_BOOL,
                                      JSON_NULL,   JSON_ARRAY,  JSON_OBJECT, JSON_NUMBER};
    size_t k;
    (void)state;
    for (k = 0; k < sizeof docs / sizeof docs[0]; k++) {
        json_value *v = parse(docs[k]);
        if (!v) fail_msg("%s: %s", docs[k], err);
        assert_int_equal(json_type_of(v), types[k]);
        json_free(v);
    }
}

/* Accessors take NULL and values of the wrong type. */
static void test_wrong_types(void **state) {
    json_value *v = parse("[\"s\", 1, {\"a\": 1}]");
    const json_value *s = json_at(v, 0), *n = json_at(v, 1), *o = json_at(v, 2);
    double d = 5;
    int64_t i = 5;
    int b = 5;
    (void)state;
    assert_non_null(v);
    assert_int_equal(json_type_of(NULL), JSON_NULL);
    assert_null(json_get(NULL, "a"));
    assert_null(json_get(v, "a")); /* an array */
    assert_null(json_get(s, "a"));
    assert_null(json_get(o, NULL));
    assert_int_equal(json_count(NULL), 0);
    assert_int_equal(json_count(s), 0);
    assert_null(json_at(NULL, 0));
    assert_null(json_at(n, 0));
    assert_null(json_key_at(v, 0)); /* an array has no keys */
    assert_int_equal(json_key_len(v, 0), 0);
    assert_null(json_key_at(NULL, 0));
    assert_null(json_string(n));
    assert_null(json_string(NULL));
    assert_int_equal(json_string_len(n), 0);
    assert_false(json_number(s, &d));
    assert_false(json_int64(s, &i));
    assert_false(json_bool(n, &b));
    assert_false(json_number(NULL, &d));
    assert_true(d == 5 && i == 5 && b == 5); /* untouched on failure */
    assert_true(json_number(n, NULL));       /* out may be NULL */
    json_free(v);
    json_free(NULL);
}

/* The text need not be NUL-terminated: nothing past len is read. */
static void test_length_bounds(void **state) {
    char *buf = (char *)malloc(5);
    json_value *v;
    int64_t i = 0;
    (void)state;
    memcpy(buf, "[1,2]", 5); /* no NUL */
    v = json_parse(buf, 5, err, sizeof err);
    assert_non_null(v);
    assert_int_equal(json_count(v), 2);
    json_free(v);
    v = json_parse("123", 2, err, sizeof err);
    assert_true(json_int64(v, &i));
    assert_int_equal(i, 12);
    json_free(v);
    v = json_parse("[1,2]xyz", 5, err, sizeof err);
    assert_non_null(v);
    json_free(v);
    memcpy(buf, "\"abc\"", 5);
    v = json_parse(buf, 4, err, sizeof err); /* the closing quote is past len */
    assert_null(v);
    assert_contains(err, "unterminated string");
    assert_null(json_parse(NULL, 0, err, sizeof err));
    assert_contains(err, "expected a value");
    free(buf);
}

/* ---------------------------------------------------------------- numbers */
typedef struct num_row {
    const char *text;
    int is_int;
    int64_t i;
    double d;
} num_row;

static const num_row num_rows[] = {
    {"0", 1, 0, 0.0},
    {"-0", 1, 0, -0.0},
    {"42", 1, 42, 42.0},
    {"-17", 1, -17, -17.0},
    {"9007199254740993", 1, INT64_C(9007199254740993), 9007199254740992.0}, /* 2^53 + 1 */
    {"-9007199254740993", 1, -INT64_C(9007199254740993), -9007199254740992.0},
    {"9223372036854775807", 1, INT64_MAX, 9223372036854775807.0},
    {"-9223372036854775808", 1, INT64_MIN, -9223372036854775808.0},
    {"9223372036854775808", 0, 0, 9223372036854775808.0},
    {"-9223372036854775809", 0, 0, -9223372036854775809.0},
    {"18446744073709551616", 0, 0, 18446744073709551616.0},
    {"1.0", 1, 1, 1.0},
    {"1e3", 1, 1000, 1000.0},
    {"1E+2", 1, 100, 100.0},
    {"1.5e1", 1, 15, 15.0},
    {"12.50e1", 1, 125, 125.0},
    {"100e-2", 1, 1, 1.0},
    {"0.0e5", 1, 0, 0.0},
    {"0e999999999999", 1, 0, 0.0},
    {"1e18", 1, INT64_C(1000000000000000000), 1e18},
    {"1e19", 0, 0, 1e19},
    {"10000000000000000000e-1", 1, INT64_C(1000000000000000000), 1e18},
    {"92233720368547758070e-1", 1, INT64_MAX, 9223372036854775807.0},
    {"123456789012345678901e-3", 0, 0, 123456789012345678.901},
    {"1.25", 0, 0, 1.25},
    {"1e-1", 0, 0, 0.1},
    {"2.5E-3", 0, 0, 0.0025},
    {"1e-400", 0, 0, 0.0}, /* underflow is fine */
    {"1.7976931348623157e308", 0, 0, 1.7976931348623157e308},
    {"0.1", 0, 0, 0.1},
    {"1e-05", 0, 0, 1e-05},
    {"500000.0", 1, 500000, 500000.0},
};

static void test_numbers(void **state) {
    size_t k;
    (void)state;
    for (k = 0; k < sizeof num_rows / sizeof num_rows[0]; k++) {
        const num_row *r = &num_rows[k];
        json_value *v = parse(r->text);
        double d = 0;
        int64_t i = -1;
        if (!v) fail_msg("%s: %s", r->text, err);
        assert_true(json_number(v, &d));
        if (d != r->d) fail_msg("%s: double %.17g, expected %.17g", r->text, d, r->d);
        if (json_int64(v, &i) != r->is_int)
            fail_msg("%s: json_int64 says %d, expected %d", r->text, !r->is_int, r->is_int);
        if (r->is_int && i != r->i)
            fail_msg("%s: int64 %lld, expected %lld", r->text, (long long)i, (long long)r->i);
        json_free(v);
    }
}

/* strtod reads the locale's decimal point; the parser must not. */
static void test_numbers_locale(void **state) {
    static const char *locales[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8"};
    size_t k;
    json_value *v;
    double d = 0;
    (void)state;
    for (k = 0; k < sizeof locales / sizeof locales[0]; k++)
        if (setlocale(LC_NUMERIC, locales[k])) break;
    if (k == sizeof locales / sizeof locales[0]) skip(); /* none installed */
    v = parse("2.5");
    assert_true(json_number(v, &d));
    json_free(v);
    setlocale(LC_NUMERIC, "C");
    assert_true(d == 2.5);
}

/* ---------------------------------------------------------------- strings */
static void test_strings(void **state) {
    static const struct {
        const char *text, *want;
        size_t want_len;
    } rows[] = {
        {"\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\"", "\" \\ / \b \f \n \r \t", 15},
        {"\"\\u0041\\u00e9\\u20AC\\uFFFF\"", "A\xc3\xa9\xe2\x82\xac\xef\xbf\xbf", 9},
        {"\"\\uD834\\uDD1E\"", "\xf0\x9d\x84\x9e", 4}, /* U+1D11E, a surrogate pair */
        {"\"\\udbff\\udfff\"", "\xf4\x8f\xbf\xbf", 4}, /* U+10FFFF */
        {"\"a\\u0000b\"", "a\0b", 3},
        {"\"\xff\xfe\xc3\"", "\xff\xfe\xc3", 3}, /* invalid UTF-8 passes through */
        {"\"\x7f\"", "\x7f", 1},                 /* DEL is not a control character here */
        {"\"\"", "", 0},
    };
    size_t k;
    (void)state;
    for (k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        json_value *v = parse(rows[k].text);
        if (!v) fail_msg("%s: %s", rows[k].text, err);
        assert_int_equal(json_string_len(v), rows[k].want_len);
        assert_memory_equal(json_string(v), rows[k].want, rows[k].want_len + 1);
        json_free(v);
    }
}

/* Keys that differ only after a NUL are distinct; json_key_len has their length. */
static void test_keys_with_nul(void **state) {
    json_value *v = parse("{\"a\\u0000b\": 1, \"a\\u0000c\": 2, \"a\": 3}");
    int64_t i = 0;
    (void)state;
    if (!v) fail_msg("%s", err);
    assert_int_equal(json_key_len(v, 0), 3);
    assert_int_equal(json_key_len(v, 2), 1);
    assert_true(json_int64(json_get(v, "a"), &i));
    assert_int_equal(i, 3);
    json_free(v);
}

/* ---------------------------------------------------------------- errors */
typedef struct err_row {
    const char *name, *text;
    size_t len; /* 0: strlen(text) */
    const char *msg;
} err_row;

static const err_row err_rows[] = {
    {"empty input", "", 0, "json: line 1 column 1: expected a value (found end of input)"},
    {"whitespace only", "  \n ", 0, "json: line 2 column 2: expected a value (found end of input)"},
    {"open object", "{", 0,
     "line 1 column 2: expected a string key in object (found end of input)"},
    {"open array", "[1", 0, "line 1 column 3: expected ',' or ']' in array (found end of input)"},
    {"missing colon", "{\n  \"a\": 1,\n  \"b\" 2\n}", 0,
     "json: line 3 column 7: expected ':' after object key (found '2')"},
    {"missing comma in object", "{\n \"a\": 1,\n \"b\": 2\n \"c\": 3}", 0,
     "json: line 4 column 2: expected ',' or '}' in object (found '\"')"},
    {"missing comma in array", "[1 2]", 0,
     "line 1 column 4: expected ',' or ']' in array (found '2')"},
    {"trailing comma in array", "[1,]", 0, "line 1 column 4: expected a value (found ']')"},
    {"trailing comma in object", "{\"a\":1,}", 0,
     "line 1 column 8: expected a string key in object (found '}')"},
    {"unquoted key", "{a:1}", 0, "expected a string key in object (found 'a')"},
    {"single quotes", "['a']", 0, "expected a value (found ''')"},
    {"second value", "[1] 2", 0,
     "line 1 column 5: expected end of input after the value (found '2')"},
    {"two objects", "{}{}", 0, "expected end of input after the value"},
    {"short literal", "tru", 0, "line 1 column 1: expected a value"},
    {"capital literal", "True", 0, "expected a value (found 'T')"},
    {"long literal", "nulll", 0,
     "line 1 column 5: expected end of input after the value (found 'l')"},
    {"leading zero", "01", 0, "line 1 column 1: invalid number: leading zeros are not allowed"},
    {"negative leading zero", "-012", 0, "leading zeros are not allowed"},
    {"lone minus", "-", 0, "expected a digit after '-' (found end of input)"},
    {"minus Infinity", "-Infinity", 0, "expected a digit after '-' (found 'I')"},
    {"no fraction digits", "1.", 0, "line 1 column 3: expected a digit after '.' in a number"},
    {"no fraction digits before e", "1.e5", 0,
     "expected a digit after '.' in a number (found 'e')"},
    {"no exponent digits", "1e", 0, "expected a digit in a number's exponent (found end of input)"},
    {"no exponent digits after sign", "1e+", 0, "expected a digit in a number's exponent"},
    {"leading dot", ".5", 0, "expected a value (found '.')"},
    {"plus sign", "+1", 0, "expected a value (found '+')"},
    {"hex", "0x10", 0, "expected end of input after the value (found 'x')"},
    {"NaN", "NaN", 0, "expected a value (found 'N')"},
    {"number too large", "[1e309]", 0, "line 1 column 2: number out of the double range"},
    {"negative number too large", "-1e400", 0, "number out of the double range"},
    {"long integer too large",
     "1000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
     "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
     "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
     "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
     0, "number out of the double range"},
    {"unterminated string", "\"abc", 0, "line 1 column 1: unterminated string"},
    {"escaped closing quote", "[\"a\\\"]", 0, "line 1 column 2: unterminated string"},
    {"tab in string", "\"a\tb\"", 0, "line 1 column 3: control character 0x09 in string"},
    {"newline in string", "\"a\nb\"", 0, "control character 0x0a in string"},
    {"NUL byte in string", "\"a\0b\"", 5, "control character 0x00 in string"},
    {"bad escape", "\"\\x\"", 0, "line 1 column 2: invalid escape '\\x' in string"},
    {"escaped byte 0x01", "\"\\\x01\"", 0, "invalid escape (backslash, byte 0x01)"},
    {"short \\u", "\"\\u12\"", 0, "invalid \\u escape (expected 4 hex digits)"},
    {"non-hex \\u", "\"\\u12G4\"", 0, "invalid \\u escape"},
    {"lone high surrogate", "\"\\ud800\"", 0,
     "UTF-16 high surrogate \\ud800 not followed by a low surrogate"},
    {"high surrogate then letter", "\"\\ud800\\u0041\"", 0, "not followed by a low surrogate"},
    {"high surrogate then high", "\"\\ud800\\ud800\"", 0, "not followed by a low surrogate"},
    {"high surrogate then text", "\"\\ud800abcdef\"", 0, "not followed by a low surrogate"},
    {"lone low surrogate", "\"\\udc00\"", 0, "unpaired UTF-16 low surrogate \\udc00"},
    {"comment", "/* c */ 1", 0, "expected a value (found '/')"},
    {"byte order mark", "\xef\xbb\xbf{}", 0, "expected a value (found byte 0xef)"},
    {"duplicate key", "{\"a\":1,\"b\":2,\"a\":3}", 0,
     "line 1 column 14: duplicate key \"a\" in object"},
    {"nested duplicate key", "[{\"x\": {\"k\": 1, \"k\": 1}}]", 0,
     "line 1 column 17: duplicate key \"k\" in object"},
    {"duplicate via escape", "{\"ab\": 1, \"a\\u0062\": 2}", 0, "duplicate key \"ab\""},
    {"object as key", "{{}:1}", 0, "expected a string key in object (found '{')"},
    {"array close in object", "{\"a\":1]", 0, "expected ',' or '}' in object (found ']')"},
    {"object close in array", "[1}", 0, "expected ',' or ']' in array (found '}')"},
};

static void test_error(void **state) {
    const err_row *r = (const err_row *)*state;
    const char *msg = parse_fails(r->text, r->len ? r->len : strlen(r->text));
    assert_contains(msg, r->msg);
}

/* 64 nested arrays/objects parse, 65 do not; a deep attack fails fast (no recursion). */
static void test_depth(void **state) {
    enum { DEEP = 100000 };
    char *s = (char *)malloc(2 * DEEP + 2);
    json_value *v;
    int n, k;
    (void)state;
    for (n = 64; n <= 65; n++) {
        for (k = 0; k < n; k++) {
            s[k] = '[';
            s[n + k] = ']';
        }
        v = json_parse(s, (size_t)(2 * n), err, sizeof err);
        if (n == 64) {
            if (!v) fail_msg("64 levels: %s", err);
            json_free(v);
        } else {
            assert_null(v);
            assert_contains(err, "line 1 column 65: nesting deeper than 64 arrays/objects");
        }
    }
    for (k = 0; k < 64; k++) memcpy(s + 5 * k, "{\"a\":", 5);
    memcpy(s + 5 * 64, "{}", 2);
    for (k = 0; k < 64; k++) s[5 * 64 + 2 + k] = '}';
    v = json_parse(s, 5 * 64 + 2 + 64, err, sizeof err);
    assert_null(v);
    assert_contains(err, "nesting deeper than 64");
    v = json_parse(s + 5, 5 * 63 + 2 + 63, err, sizeof err);
    if (!v) fail_msg("64 objects: %s", err);
    json_free(v);
    memset(s, '[', DEEP);
    assert_null(json_parse(s, DEEP, err, sizeof err));
    memset(s, '{', DEEP);
    assert_null(json_parse(s, DEEP, err, sizeof err));
    free(s);
}

/* The message buffer: NULL, empty, or short (cut, NUL-terminated). */
static void test_err_buffer(void **state) {
    char small[12];
    (void)state;
    assert_null(json_parse("[1,", 3, NULL, 0));
    small[0] = 'x';
    assert_null(json_parse("[1,", 3, small, 0));
    assert_int_equal(small[0], 'x');
    memset(small, 'x', sizeof small);
    assert_null(json_parse("[1,", 3, small, sizeof small));
    assert_string_equal(small, "json: line ");
    memcpy(err, "old", 4);
    json_free(parse("1"));
    assert_string_equal(err, ""); /* success clears it */
}

/* ---------------------------------------------------------------- big documents */
static void test_large(void **state) {
    enum { N = 20000 };
    size_t cap = (size_t)N * 32 + 16, k, o = 0;
    char *s = (char *)malloc(cap);
    json_value *v;
    (void)state;
    /* Keys in reverse order, so the sorted index is not the document order. */
    s[o++] = '{';
    for (k = 0; k < N; k++)
        o += (size_t)snprintf(s + o, cap - o, "%s\"k%05lu\": [%lu]", k ? "," : "",
                              (unsigned long)(N - 1 - k), (unsigned long)(N - 1 - k));
    s[o++] = '}';
    v = json_parse(s, o, err, sizeof err);
    if (!v) fail_msg("%s", err);
    assert_int_equal(json_count(v), N);
    for (k = 0; k < N; k++) {
        char key[16];
        int64_t i = 0;
        snprintf(key, sizeof key, "k%05lu", (unsigned long)k);
        if (!json_int64(json_at(json_get(v, key), 0), &i) || i != (int64_t)k)
            fail_msg("json_get(%s)", key);
        assert_string_equal(json_key_at(v, (size_t)N - 1 - k), key);
    }
    json_free(v);
    /* One string bigger than an arena block. */
    memset(s, 'a', cap);
    s[0] = '"';
    s[cap - 1] = '"';
    v = json_parse(s, cap, err, sizeof err);
    assert_int_equal(json_string_len(v), cap - 2);
    json_free(v);
    free(s);
}

/* ---------------------------------------------------------------- fuzz */
/* Touches every value (so a bad pointer shows under the sanitizers). */
static size_t walk(const json_value *v) {
    size_t k, n = 1;
    double d = 0;
    int64_t i = 0;
    int b = 0;
    const char *s = json_string(v);
    if (s) n += strlen(s) + json_string_len(v);
    json_number(v, &d);
    json_int64(v, &i);
    json_bool(v, &b);
    for (k = 0; k < json_count(v); k++) {
        const char *key = json_key_at(v, k);
        if (key) n += strlen(key) + (json_get(v, key) != NULL);
        n += walk(json_at(v, k));
    }
    return n;
}

static void fuzz_one(const char *text, size_t len) {
    char *copy = (char *)malloc(len ? len : 1); /* exact size: an overread shows */
    json_value *v;
    memcpy(copy, text, len);
    v = json_parse(copy, len, err, sizeof err);
    if (v) {
        walk(v);
        json_free(v);
    } else if (strncmp(err, "json: ", 6) != 0) {
        fail_msg("no message for a failed parse of %lu bytes", (unsigned long)len);
    }
    free(copy);
}

static void test_fuzz(void **state) {
    static const char doc[] =
        "{\"architectures\": [\"LlamaForCausalLM\"], \"n\": -12.5e-3, \"big\": "
        "9223372036854775807,\n"
        " \"s\": \"a\\\"b\\\\c\\u00e9\\ud83d\\ude00\\n\", \"t\": true, \"f\": false, \"z\": null,\n"
        " \"nested\": {\"a\": [[], {}, [1, [2, [3]]]], \"b\": {\"c\": \"d\"}}, \"e\": 1E+2, "
        "\"zero\": 0}";
    static const unsigned char flips[] = {0x00, '"', '\\', '{', '}', '[', ']',  ',',
                                          ':',  '0', '-',  'e', '.', 'u', 0xff, 0x1f};
    size_t n = sizeof doc - 1, len, k, f;
    char buf[sizeof doc];
    json_value *v;
    (void)state;
    v = json_parse(doc, n, err, sizeof err);
    if (!v) fail_msg("the document itself: %s", err);
    json_free(v);
    for (len = 0; len < n; len++) fuzz_one(doc, len);
    for (k = 0; k < n; k++) {
        for (f = 0; f < sizeof flips + 1; f++) {
            memcpy(buf, doc, n);
            buf[k] = f < sizeof flips ? (char)flips[f] : (char)(buf[k] ^ 0x20);
            fuzz_one(buf, n);
            fuzz_one(buf, k + 1); /* flipped, then cut right after */
        }
    }
}

/* ---------------------------------------------------------------- registration */
#include "registry.h"

int main(void) {
    size_t i;
    ADD(test_document);
    ADD(test_scalars);
    ADD(test_wrong_types);
    ADD(test_length_bounds);
    ADD(test_numbers);
    ADD(test_numbers_locale);
    ADD(test_strings);
    ADD(test_keys_with_nul);
    for (i = 0; i < sizeof err_rows / sizeof err_rows[0]; i++)
        add(err_rows[i].name, test_error, &err_rows[i]);
    ADD(test_depth);
    ADD(test_err_buffer);
    ADD(test_large);
    ADD(test_fuzz);
    return _cmocka_run_group_tests("json", tests, ntests, NULL, NULL);
}
