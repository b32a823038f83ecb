/* libtalon_bench.so: talon's dispatcher as a shared library for bench/ops.py (ctypes), plus a
   description of talon's argument structs (each field's name, offset, size and kind) from which
   bench/mirror.py builds the ctypes mirrors, checking every field's offset and the total size.
   BENCH_STRUCTS below is the one list of those fields: bench/ops_*.py hold none.

   Adding a field to a struct in talon.h: add F(name, KIND) to its line here, in talon.h's
   order; nothing in Python changes (ops_*.py set the fields they use by name, or by position
   for the structs they fill positionally). Adding an argument struct: a line here.

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

/* Every public argument struct of talon.h, and talon_ctx_options; fields in talon.h's order. */
#define BENCH_STRUCTS(S, F) \
    S(talon_ctx_options, F(context, HANDLE) F(flags, U32)) \
    S(talon_check_report, \
      F(violated, I32) F(op, HANDLE) F(kernel, HANDLE) F(what, HANDLE) F(rule, HANDLE) \
      F(index, I64) F(value, I64) F(bound, I64)) \
    S(talon_rmsnorm_args, \
      F(out, PTR) F(in, PTR) F(weight, PTR) F(rows, I64) F(cols, I64) F(out_stride, I64) \
      F(in_stride, I64) F(eps, F32) F(dtype, ENUM)) \
    S(talon_fused_add_rmsnorm_args, \
      F(in, PTR) F(residual, PTR) F(weight, PTR) F(rows, I64) F(cols, I64) F(in_stride, I64) \
      F(residual_stride, I64) F(eps, F32) F(dtype, ENUM)) \
    S(talon_layernorm_args, \
      F(out, PTR) F(in, PTR) F(weight, PTR) F(bias, PTR) F(rows, I64) F(cols, I64) \
      F(out_stride, I64) F(in_stride, I64) F(eps, F32) F(dtype, ENUM)) \
    S(talon_silu_and_mul_args, \
      F(out, PTR) F(in, PTR) F(rows, I64) F(cols, I64) F(out_stride, I64) F(in_stride, I64) \
      F(dtype, ENUM)) \
    S(talon_gelu_and_mul_args, \
      F(out, PTR) F(in, PTR) F(rows, I64) F(cols, I64) F(out_stride, I64) F(in_stride, I64) \
      F(dtype, ENUM) F(approx, ENUM)) \
    S(talon_moe_router_topk_args, \
      F(topk_weights, PTR) F(topk_ids, PTR) F(logits, PTR) F(correction_bias, PTR) \
      F(tokens, I64) F(experts, I64) F(k, I64) F(logits_stride, I64) F(logits_dtype, ENUM) \
      F(scoring, ENUM) F(renormalize, I32)) \
    S(talon_topk_args, \
      F(out_values, PTR) F(out_indices, PTR) F(in, PTR) F(workspace, PTR) \
      F(workspace_bytes, I64) F(rows, I64) F(cols, I64) F(k, I64) F(in_stride, I64) \
      F(sorted, I32) F(dtype, ENUM)) \
    S(talon_moe_align_block_size_args, \
      F(sorted_token_ids, PTR) F(expert_ids, PTR) F(num_tokens_post_padded, PTR) \
      F(topk_ids, PTR) F(tokens, I64) F(k, I64) F(experts, I64) F(block_size, I64) \
      F(sorted_capacity, I64) F(expert_ids_capacity, I64)) \
    S(talon_moe_sum_args, \
      F(out, PTR) F(in, PTR) F(weights, PTR) F(tokens, I64) F(k, I64) F(hidden, I64) \
      F(dtype, ENUM)) \
    S(talon_rope_args, \
      F(q, PTR) F(k, PTR) F(positions, PTR) F(cos_sin_cache, PTR) F(tokens, I64) \
      F(num_q_heads, I64) F(num_kv_heads, I64) F(head_dim, I64) F(rot_dim, I64) \
      F(q_stride, I64) F(k_stride, I64) F(max_pos, I64) F(theta, F32) F(dtype, ENUM) \
      F(positions_dtype, ENUM) F(style, ENUM)) \
    S(talon_kv_append_args, \
      F(k_cache, PTR) F(v_cache, PTR) F(k, PTR) F(v, PTR) F(slot_mapping, PTR) \
      F(tokens, I64) F(num_kv_heads, I64) F(head_dim, I64) F(num_pages, I64) \
      F(page_size, I64) F(k_stride, I64) F(v_stride, I64) F(k_scale, F32) F(v_scale, F32) \
      F(dtype, ENUM) F(cache_dtype, ENUM) F(layout, ENUM)) \
    S(talon_decode_attention_args, \
      F(o, PTR) F(lse, PTR) F(q, PTR) F(k_cache, PTR) F(v_cache, PTR) F(page_table, PTR) \
      F(kv_lens, PTR) F(workspace, PTR) F(workspace_bytes, I64) F(batch, I64) \
      F(num_qo_heads, I64) F(num_kv_heads, I64) F(head_dim, I64) F(page_size, I64) \
      F(num_pages, I64) F(page_table_stride, I64) F(max_kv_len, I64) F(window, I64) \
      F(num_splits, I64) \
      F(sm_scale, F32) F(logits_soft_cap, F32) F(k_scale, F32) F(v_scale, F32) \
      F(dtype, ENUM) F(kv_dtype, ENUM) F(layout, ENUM)) \
    S(talon_merge_attention_states_args, \
      F(o, PTR) F(lse, PTR) F(o_a, PTR) F(lse_a, PTR) F(o_b, PTR) F(lse_b, PTR) \
      F(rows, I64) F(head_dim, I64) F(dtype, ENUM)) \
    S(talon_prefill_attention_args, \
      F(o, PTR) F(lse, PTR) F(q, PTR) F(k, PTR) F(v, PTR) F(cu_seqlens_q, PTR) \
      F(cu_seqlens_k, PTR) F(workspace, PTR) F(workspace_bytes, I64) F(batch, I64) \
      F(total_q, I64) F(total_kv, I64) \
      F(max_seqlen_q, I64) F(num_qo_heads, I64) F(num_kv_heads, I64) F(head_dim, I64) \
      F(v_head_dim, I64) F(q_stride, I64) F(k_stride, I64) F(v_stride, I64) F(o_stride, I64) \
      F(window, I64) \
      F(causal, I32) F(sm_scale, F32) F(logits_soft_cap, F32) F(dtype, ENUM) \
      F(q_scale, F32) F(k_scale, F32) F(v_scale, F32)) \
    S(talon_prefill_attention_paged_args, \
      F(o, PTR) F(lse, PTR) F(q, PTR) F(k_cache, PTR) F(v_cache, PTR) F(page_table, PTR) \
      F(kv_lens, PTR) F(cu_seqlens_q, PTR) F(workspace, PTR) F(workspace_bytes, I64) \
      F(batch, I64) F(total_q, I64) F(max_seqlen_q, I64) \
      F(max_kv_len, I64) F(num_pages, I64) F(page_size, I64) F(page_table_stride, I64) \
      F(num_qo_heads, I64) F(num_kv_heads, I64) F(head_dim, I64) F(q_stride, I64) \
      F(o_stride, I64) F(window, I64) F(causal, I32) F(sm_scale, F32) \
      F(logits_soft_cap, F32) F(dtype, ENUM) F(layout, ENUM) F(kv_dtype, ENUM) F(k_scale, F32) \
      F(v_scale, F32)) \
    S(talon_gemm_args, \
      F(d, PTR) F(a, PTR) F(b, PTR) F(bias, PTR) F(c, PTR) F(a_scale, PTR) F(b_scale, PTR) \
      F(m, I64) F(n, I64) F(k, I64) F(lda, I64) F(ldb, I64) F(ldc, I64) F(ldd, I64) \
      F(alpha, F32) F(beta, F32) F(act, ENUM) F(gated, I32) F(dtype, ENUM) F(out_dtype, ENUM) \
      F(scale, ENUM)) \
    S(talon_quant_fp8_args, \
      F(out, PTR) F(in, PTR) F(scale, PTR) F(rows, I64) F(cols, I64) F(out_stride, I64) \
      F(in_stride, I64) F(scale_row_stride, I64) F(scale_group_stride, I64) F(mode, ENUM) \
      F(dtype, ENUM)) \
    S(talon_rmsnorm_quant_fp8_args, \
      F(out, PTR) F(scale, PTR) F(in, PTR) F(residual, PTR) F(weight, PTR) F(rows, I64) \
      F(cols, I64) F(out_stride, I64) F(in_stride, I64) F(residual_stride, I64) F(eps, F32) \
      F(mode, ENUM) F(dtype, ENUM)) \
    S(talon_moe_gemm_args, \
      F(d, PTR) F(a, PTR) F(b, PTR) F(sorted_token_ids, PTR) F(expert_ids, PTR) \
      F(num_tokens_post_padded, PTR) F(topk_weights, PTR) F(tokens, I64) F(topk, I64) \
      F(experts, I64) F(block_size, I64) F(sorted_capacity, I64) F(expert_ids_capacity, I64) \
      F(n, I64) F(k, I64) F(lda, I64) F(ldb, I64) F(ldd, I64) F(a_rows, ENUM) F(d_rows, ENUM) \
      F(act, ENUM) F(gated, I32) F(dtype, ENUM)) \
    S(talon_grouped_gemm_args, \
      F(d, PTR) F(a, PTR) F(b, PTR) F(tile_groups, PTR) F(rows_used, PTR) F(group_rows, PTR) \
      F(a_scale, PTR) F(b_scale, PTR) F(groups, I64) F(rows, I64) F(n, I64) F(k, I64) \
      F(lda, I64) F(ldb, I64) F(ldd, I64) F(layout, ENUM) F(act, ENUM) F(scale, ENUM) \
      F(gated, I32) F(dtype, ENUM)) \
    S(talon_gather_rows_args, \
      F(out, PTR) F(in, PTR) F(indices, PTR) F(rows, I64) F(cols, I64) F(in_rows, I64) \
      F(out_stride, I64) F(in_stride, I64) F(dtype, ENUM) F(index_dtype, ENUM))

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
