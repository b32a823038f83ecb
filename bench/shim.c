/* libtalon_bench.so: talon's dispatcher as a shared library for bench/ops.py (ctypes), plus a
   description of talon's argument structs (each field's name, offset, size and kind) from which
   bench/mirror.py builds the ctypes mirrors, checking every field's offset and the total size.
   BENCH_STRUCTS below is the one list of those fields (an op's args struct in its family's
   <FAMILY>_BENCH_STRUCTS, tests/<family>/cases_<family>.h): bench/ops_*.py hold none.

   Adding a field to a struct in talon.h: add F(name, KIND) to its entry, in talon.h's order;
   nothing in Python changes (ops_*.py set the fields they use by name, or by position for the
   structs they fill positionally). Adding an op's args struct: an entry in its family's list.

   Kinds (bench/mirror.py maps them to ctypes):
     PTR     CUdeviceptr (device address)         I64  int64_t
     I32     int / int32_t                        U32  unsigned / uint32_t
     ENUM    an int-sized enum (talon_dtype, ...) F32  float
     HANDLE  a host pointer or driver handle (CUcontext)

   What the compiler checks here (see bench_checks() and BENCH_ROW; any failure stops the
   build of libtalon_bench.so, so `make test` fails):
   - every listed field exists (offsetof) and is listed once (the C mirror struct below);
   - its size is its kind's, and for PTR, I64, I32, U32 and F32 its type is the kind's C type
     (a float listed as I32, or a CUdeviceptr as I64, is an incompatible pointer comparison);
     an ENUM must be an integer of int's size (an enum's compatible integer type is the
     compiler's choice) and a HANDLE a pointer of any type;
   - its offset equals its offset in a C struct made of the listed kinds in the listed order
     (bench_mirror_<T>), which is what the ctypes mirror is: a field missing from the list or
     listed out of order moves the offsets after it;
   - sizeof(bench_mirror_<T>) == sizeof(T): the last field's end rounded up to the alignment
     covers the struct (a field added at the end of T and missing here);
   - the list has one value per member of T: T is initialised positionally with one 0 per
     listed field under -Wmissing-field-initializers made an error (GCC and Clang), which
     catches a member missing from the list wherever it is, even one that lands in padding
     (the offset and size checks cannot see those: C has no way to count a struct's members,
     and this warning is the nearest thing; a compiler without it would miss only that case).
   At run time bench/mirror.py (ops.py and tests/bench/check_mirrors.py) compares each ctypes
   field's offset and size with offsetof/sizeof from here, and the ctypes size with sizeof. */
#define TALON_IMPLEMENTATION
#include "talon.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>
/* the op families' lists: <FAMILY>_BENCH_STRUCTS in tests/<family>/cases_<family>.h */
#include "../tests/common/family_cases.h"

/* Every public argument struct of talon.h (the ops' in their families), talon_ctx_options and
   talon_check_report; fields in talon.h's order. */
#define BENCH_STRUCTS(S, F) \
    S(talon_ctx_options, F(context, HANDLE) F(flags, U32)) \
    S(talon_check_report, \
      F(violated, I32) F(op, HANDLE) F(kernel, HANDLE) F(what, HANDLE) F(rule, HANDLE) \
      F(index, I64) F(value, I64) F(bound, I64)) \
    NORM_BENCH_STRUCTS(S, F) ACT_BENCH_STRUCTS(S, F) ROUTER_BENCH_STRUCTS(S, F) \
    TOPK_BENCH_STRUCTS(S, F) MOE_BENCH_STRUCTS(S, F) ROPE_BENCH_STRUCTS(S, F) \
    KV_CACHE_BENCH_STRUCTS(S, F) GATHER_BENCH_STRUCTS(S, F) DECODE_BENCH_STRUCTS(S, F) \
    PREFILL_BENCH_STRUCTS(S, F) GEMM_BENCH_STRUCTS(S, F) QUANT_BENCH_STRUCTS(S, F) \
    MOE_GEMM_BENCH_STRUCTS(S, F)

/* The C type of each kind (what the ctypes mirror holds). */
typedef CUdeviceptr bench_c_PTR;
typedef void *bench_c_HANDLE;
typedef int64_t bench_c_I64;
typedef int32_t bench_c_I32;
typedef uint32_t bench_c_U32;
typedef int bench_c_ENUM;
typedef float bench_c_F32;

/* 0, or a compile error where c is false (C99: an array of negative size). */
#define BENCH_ASSERT(c) (0 * sizeof(char[(c) ? 1 : -1]))
/* 0, or a compile error where the member's type is not the kind's C type (comparing pointers
   to incompatible types is a constraint violation; -Werror makes the diagnostic fatal). Not
   evaluated (sizeof). */
#define BENCH_TYPE_IS(e, type) (0 * sizeof(&(e) == (type *)0))
#define BENCH_TYPE_PTR(e) BENCH_TYPE_IS(e, bench_c_PTR)
#define BENCH_TYPE_I64(e) BENCH_TYPE_IS(e, bench_c_I64)
#define BENCH_TYPE_I32(e) BENCH_TYPE_IS(e, bench_c_I32)
#define BENCH_TYPE_U32(e) BENCH_TYPE_IS(e, bench_c_U32)
#define BENCH_TYPE_F32(e) BENCH_TYPE_IS(e, bench_c_F32)
/* An enum: an integer (% takes no float or pointer); its exact type is the compiler's choice. */
#define BENCH_TYPE_ENUM(e) (0 * sizeof((e) % 1))
/* A handle: a pointer (compared with a void pointer; an integer would be a constraint error). */
#define BENCH_TYPE_HANDLE(e) (0 * sizeof((e) == (void *)0))

/* struct bench_mirror_<T>: the listed kinds in the listed order (the ctypes mirror, in C). */
#define BENCH_MIRROR(T, FIELDS) struct bench_mirror_##T { FIELDS };
#define BENCH_MIRROR_FIELD(n, k) bench_c_##k n;
BENCH_STRUCTS(BENCH_MIRROR, BENCH_MIRROR_FIELD)

typedef struct talon_bench_field {
    const char *name;
    size_t offset;      /* offsetof(T, name) */
    size_t size;        /* sizeof of the member */
    const char *kind;   /* "PTR", "I64", "I32", "U32", "ENUM", "F32" or "HANDLE" */
} talon_bench_field;

const talon_bench_field *talon_bench_struct(const char *name, int *count, size_t *size);
const char *talon_bench_struct_name(int i);

/* One row of a struct's table; bench_cur is the struct, bench_mirror its C mirror. */
#define BENCH_MEMBER(n) (((bench_cur *)0)->n)
#define BENCH_ROW(n, k) \
    {#n, \
     offsetof(bench_cur, n) + BENCH_ASSERT(offsetof(bench_cur, n) == offsetof(bench_mirror, n)), \
     sizeof BENCH_MEMBER(n) + BENCH_ASSERT(sizeof BENCH_MEMBER(n) == sizeof(bench_c_##k)) \
         + BENCH_TYPE_##k(BENCH_MEMBER(n)), \
     #k},
#define BENCH_LOOKUP(T, FIELDS) \
    if (!strcmp(name, #T)) { \
        typedef T bench_cur; \
        typedef struct bench_mirror_##T bench_mirror; \
        static const talon_bench_field fields[] = {FIELDS}; \
        (void)sizeof(char[sizeof(bench_mirror) == sizeof(bench_cur) ? 1 : -1]); \
        *count = (int)(sizeof fields / sizeof fields[0]); \
        *size = sizeof(bench_cur); \
        return fields; \
    }

/* The fields of struct `name` (NULL, count and size 0 if it is not in BENCH_STRUCTS). */
const talon_bench_field *talon_bench_struct(const char *name, int *count, size_t *size) {
    *count = 0;
    *size = 0;
    if (!name)
        return NULL;
    BENCH_STRUCTS(BENCH_LOOKUP, BENCH_ROW)
    return NULL;
}

/* The i-th struct of BENCH_STRUCTS; NULL past the end. */
#define BENCH_NAME(T, FIELDS) #T,
#define BENCH_NO_FIELD(n, k)
const char *talon_bench_struct_name(int i) {
    static const char *const names[] = {BENCH_STRUCTS(BENCH_NAME, BENCH_NO_FIELD)};
    return i >= 0 && i < (int)(sizeof names / sizeof names[0]) ? names[i] : NULL;
}

/* One positional initialiser per struct, one 0 per listed field: a member of T missing from
   the list is a missing initialiser (an error here), an extra one an excess element. Never
   called; compiled for its diagnostics. */
#if defined(__GNUC__)
#pragma GCC diagnostic error "-Wmissing-field-initializers"
#endif
#define BENCH_COUNT(T, FIELDS) { T all = {FIELDS}; (void)all; }
#define BENCH_ZERO(n, k) 0,
void talon_bench_checks(void);
void talon_bench_checks(void) {
    BENCH_STRUCTS(BENCH_COUNT, BENCH_ZERO)
}
