/* A strict JSON parser (RFC 8259) into a read-only tree, for the example program's loaders
   (config.json, safetensors headers, model.safetensors.index.json).

   - Any value may be the document (not only an object or array); whitespace around it only.
   - Nesting deeper than JSON_MAX_DEPTH arrays/objects, duplicate object keys, leading zeros,
     raw control characters in strings, lone UTF-16 surrogates and numbers outside the double
     range are errors. Invalid UTF-8 in the text passes through into strings unchanged.
   - Strings are decoded to UTF-8 and NUL-terminated; one may hold "\u0000", so its byte length
     is json_string_len / json_key_len (json_string and json_key_at stop at the first NUL).
   - Errors go to err (err_len bytes, always NUL-terminated when err_len > 0; err may be NULL):
     "json: line 3 column 14: expected ',' or '}' in object (found '\"')". Columns count bytes
     from 1. Nothing is printed, nothing aborts; every read is bounded by len.
   - The tree is one allocation arena: json_free takes the value json_parse returned and frees
     everything under it. Accessors accept NULL and values of the wrong type (they return
     NULL / 0). Not thread-safe for writing, but a finished tree may be read from any thread.
   C99, also compiles as C++17. */
#ifndef TALON_EXAMPLES_JSON_H
#define TALON_EXAMPLES_JSON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define JSON_MAX_DEPTH 64

typedef enum json_type {
    JSON_NULL,
    JSON_BOOL,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT
} json_type;
typedef struct json_value json_value; /* opaque */

/* Parses text[0..len) (need not be NUL-terminated). NULL with a message on error. */
json_value *json_parse(const char *text, size_t len, char *err, size_t err_len);
/* Frees a tree json_parse returned (NULL is fine); never a value inside one. */
void json_free(json_value *v);

json_type json_type_of(const json_value *v); /* JSON_NULL for a NULL pointer */
/* The member `key` of an object (binary search); NULL if v is not an object or key is absent. */
const json_value *json_get(const json_value *obj, const char *key);
size_t json_count(const json_value *v); /* elements of an array / members of an object, else 0 */
/* The i-th element of an array or the i-th member value of an object (document order); NULL
   when i is out of range or v is neither. */
const json_value *json_at(const json_value *arr_or_obj, size_t i);
const char *json_key_at(const json_value *obj, size_t i); /* i-th member key, NULL if none */
size_t json_key_len(const json_value *obj, size_t i);     /* its length in bytes, 0 if none */
const char *json_string(const json_value *v);             /* NULL unless a string */
size_t json_string_len(const json_value *v);              /* bytes, 0 unless a string */
int json_number(const json_value *v, double *out);        /* 1 if a number */
/* 1 if a number that is an integer exactly representable in int64, read from its digits (never
   through double): "9007199254740993" is exact, "1.0", "1e3" and "-0" are integers, "1.5",
   "1e-1" and "9223372036854775808" are not. */
int json_int64(const json_value *v, int64_t *out);
int json_bool(const json_value *v, int *out); /* 1 if true/false */

#ifdef __cplusplus
}
#endif

#endif
