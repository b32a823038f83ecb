/* Dispatcher tests on a fake CUDA driver (no GPU) for talon_kv_append: one validation error per
   rule (status, message naming the field and its value, nothing loaded or launched) and the
   exact launch of each path (kernel, grid, block, params derived from the public contract, with
   the fp8 constants from the fp64 reference of ref_kv_cache.h). Its GPU test is in
   tests/rope/test_gpu_rope.c, which shares its buffer layouts and a graph with rope. */
#include "fake_driver.h"
#include "table_rows.h"
#include <math.h>
#include "ref_kv_cache.h"

typedef enum { OP_KV } op_id; /* the one op: table_rows.h's op column */
static const char *const op_names[] = {"talon_kv_append"};

enum { P_K = 0x200000, P_KC = 0x500000, P_VC = 0x600000, P_V = 0x700000, P_SLOT = 0x800000 };
#define STREAM ((CUstream)(uintptr_t)0x5157)

/* Llama-3-8B shapes, 4 tokens: Hk 8, D 128, page 16. */
static void valid_args(talon_kv_append_args *a) {
    memset(a, 0, sizeof *a);
    a->k_cache = P_KC; a->v_cache = P_VC; a->k = P_K; a->v = P_V;
    a->slot_mapping = P_SLOT; a->tokens = 4; a->num_kv_heads = 8;
    a->head_dim = 128; a->num_pages = 64; a->page_size = 16;
}

#define KV(f, k, v) SET(talon_kv_append_args, f, k, v)

/* ================================================================ validation, one per rule */
#define BAD(OP, NAME, SETS, FIELD, VALUE)                                                       \
    {.name = NAME, .op = OP, .kind = BAD_FIELDS, .set = SETS, .field = FIELD, .value = VALUE}

static const bad_row bad_rows[] = {
    {.name = "kv_append: ctx NULL", .op = OP_KV, .kind = BAD_CTX, .field = "ctx", .value = "NULL"},
    {.name = "kv_append: args NULL", .op = OP_KV, .kind = BAD_ARGS, .field = "args", .value = "NULL"},
    BAD(OP_KV, "kv_append: dtype F32", ONE(KV(dtype, ENUM, TALON_DTYPE_F32)), "args->dtype", "2"),
    BAD(OP_KV, "kv_append: dtype FP8 (input)", ONE(KV(dtype, ENUM, TALON_DTYPE_FP8_E4M3),
        KV(cache_dtype, ENUM, TALON_DTYPE_FP8_E4M3)), "args->dtype", "4"),
    BAD(OP_KV, "kv_append: cache_dtype f16 for bf16 input",
        ONE(KV(cache_dtype, ENUM, TALON_DTYPE_F16)), "args->cache_dtype", "1"),
    BAD(OP_KV, "kv_append: cache_dtype bf16 (zero) for f16 input",
        ONE(KV(dtype, ENUM, TALON_DTYPE_F16)), "args->cache_dtype", "0"),
    BAD(OP_KV, "kv_append: cache_dtype 9", ONE(KV(cache_dtype, ENUM, 9)), "args->cache_dtype", "9"),
    BAD(OP_KV, "kv_append: k_cache NULL", ONE(KV(k_cache, PTR, 0)), "args->k_cache", "NULL"),
    BAD(OP_KV, "kv_append: k_cache odd (bf16)", ONE(KV(k_cache, PTR, 0x7001)), "args->k_cache",
        "0x7001"),
    BAD(OP_KV, "kv_append: v_cache NULL", ONE(KV(v_cache, PTR, 0)), "args->v_cache", "NULL"),
    BAD(OP_KV, "kv_append: v_cache odd (bf16)", ONE(KV(v_cache, PTR, 0x7001)), "args->v_cache",
        "0x7001"),
    BAD(OP_KV, "kv_append: k NULL", ONE(KV(k, PTR, 0)), "args->k", "NULL"),
    BAD(OP_KV, "kv_append: k odd", ONE(KV(k, PTR, 0x7001)), "args->k", "0x7001"),
    BAD(OP_KV, "kv_append: v NULL", ONE(KV(v, PTR, 0)), "args->v", "NULL"),
    BAD(OP_KV, "kv_append: v odd", ONE(KV(v, PTR, 0x7001)), "args->v", "0x7001"),
    BAD(OP_KV, "kv_append: slot_mapping NULL", ONE(KV(slot_mapping, PTR, 0)),
        "args->slot_mapping", "NULL"),
    BAD(OP_KV, "kv_append: slot_mapping not 8-byte aligned", ONE(KV(slot_mapping, PTR, 0x7004)),
        "args->slot_mapping", "0x7004"),
    BAD(OP_KV, "kv_append: tokens 0", ONE(KV(tokens, I64, 0)), "args->tokens", "0"),
    BAD(OP_KV, "kv_append: tokens 2^31", ONE(KV(tokens, I64, 2147483648.0)), "args->tokens",
        "2147483648"),
    BAD(OP_KV, "kv_append: num_kv_heads 0", ONE(KV(num_kv_heads, I64, 0)), "args->num_kv_heads",
        "0"),
    BAD(OP_KV, "kv_append: head_dim 0", ONE(KV(head_dim, I64, 0)), "args->head_dim", "0"),
    BAD(OP_KV, "kv_append: head_dim 1025", ONE(KV(head_dim, I64, 1025)), "args->head_dim", "1025"),
    BAD(OP_KV, "kv_append: page_size 0", ONE(KV(page_size, I64, 0)), "args->page_size", "0"),
    BAD(OP_KV, "kv_append: page_size 48 (not a power of two)", ONE(KV(page_size, I64, 48)),
        "args->page_size", "48"),
    BAD(OP_KV, "kv_append: num_pages 0", ONE(KV(num_pages, I64, 0)), "args->num_pages", "0"),
    BAD(OP_KV, "kv_append: layout 2", ONE(KV(layout, ENUM, 2)), "args->layout", "2"),
    BAD(OP_KV, "kv_append: cache past 2^62 elements", ONE(KV(num_pages, I64, 0x1p50)),
        "args->num_pages", "1125899906842624"),
    BAD(OP_KV, "kv_append: k_stride shorter than Hk * D", ONE(KV(k_stride, I64, 1023)),
        "args->k_stride", "1023"),
    BAD(OP_KV, "kv_append: v_stride shorter than Hk * D", ONE(KV(v_stride, I64, 8)),
        "args->v_stride", "8"),
    BAD(OP_KV, "kv_append: fp8 k_scale negative",
        ONE(KV(cache_dtype, ENUM, TALON_DTYPE_FP8_E4M3), KV(k_scale, F32, -0.5)),
        "args->k_scale", "-0.5"),
    BAD(OP_KV, "kv_append: fp8 v_scale NaN",
        ONE(KV(cache_dtype, ENUM, TALON_DTYPE_FP8_E4M3), KV(v_scale, F32, NAN)),
        "args->v_scale", "nan"),
    BAD(OP_KV, "kv_append: fp8 k_scale inf",
        ONE(KV(cache_dtype, ENUM, TALON_DTYPE_FP8_E4M3), KV(k_scale, F32, INFINITY)),
        "args->k_scale", "inf"),
    BAD(OP_KV, "kv_append: more than 2^31 vectors",
        ONE(KV(tokens, I64, 2147483647)), "args->tokens", "2147483647"),
};

static void test_invalid_argument(void **state) {
    const bad_row *row = (const bad_row *)*state;
    talon_kv_append_args a;
    valid_args(&a);
    apply_sets(&a, row->set, MAX_SETS);
    assert_rejected(talon_kv_append(row->kind == BAD_CTX ? NULL : g_ctx, STREAM,
                                    row->kind == BAD_ARGS ? NULL : &a),
                    op_names[row->op], row->field, row->value);
}

/* ================================================================ launches */
#define LAUNCH(OP, NAME, SETS, SYM) {.name = NAME, .op = OP, .set = SETS, .symbol = SYM}

static const launch_row launch_rows[] = {
    LAUNCH(OP_KV, "kv_append bf16 -> v8", NONE, "talon_kv_append_bf16_v8"),
    LAUNCH(OP_KV, "kv_append f16 -> f16 v8",
           ONE(KV(dtype, ENUM, TALON_DTYPE_F16), KV(cache_dtype, ENUM, TALON_DTYPE_F16)),
           "talon_kv_append_f16_v8"),
    LAUNCH(OP_KV, "kv_append bf16 -> fp8 v8, scales 0 = 1.0",
           ONE(KV(cache_dtype, ENUM, TALON_DTYPE_FP8_E4M3)), "talon_kv_append_fp8_bf16_v8"),
    LAUNCH(OP_KV, "kv_append f16 -> fp8, scales 0.25 and 3",
           ONE(KV(dtype, ENUM, TALON_DTYPE_F16), KV(cache_dtype, ENUM, TALON_DTYPE_FP8_E4M3),
               KV(k_scale, F32, 0.25), KV(v_scale, F32, 3)), "talon_kv_append_fp8_f16_v8"),
    LAUNCH(OP_KV, "kv_append fp8, scales 1e-40 (subnormal) and FLT_MAX",
           ONE(KV(cache_dtype, ENUM, TALON_DTYPE_FP8_E4M3), KV(k_scale, F32, 1e-40),
               KV(v_scale, F32, 3.4028235e38)), "talon_kv_append_fp8_bf16_v8"),
    LAUNCH(OP_KV, "kv_append fp8, scales 2^-149 and 0.1",
           ONE(KV(cache_dtype, ENUM, TALON_DTYPE_FP8_E4M3), KV(k_scale, F32, 0x1p-149),
               KV(v_scale, F32, 0.1)), "talon_kv_append_fp8_bf16_v8"),
    LAUNCH(OP_KV, "kv_append fp8 cache at an odd address -> element-wise",
           ONE(KV(cache_dtype, ENUM, TALON_DTYPE_FP8_E4M3), KV(v_cache, PTR, P_VC + 1)),
           "talon_kv_append_fp8_bf16"),
    LAUNCH(OP_KV, "kv_append Hk*D 100 -> element-wise", ONE(KV(num_kv_heads, I64, 1),
           KV(head_dim, I64, 100)), "talon_kv_append_bf16"),
    LAUNCH(OP_KV, "kv_append fused qkv strides 6144 -> v8",
           ONE(KV(k_stride, I64, 6144), KV(v_stride, I64, 6144)), "talon_kv_append_bf16_v8"),
    LAUNCH(OP_KV, "kv_append v misaligned by 2 -> element-wise", ONE(KV(v, PTR, P_V + 2)),
           "talon_kv_append_bf16"),
    LAUNCH(OP_KV, "kv_append page_size 1, 1M tokens", ONE(KV(page_size, I64, 1),
           KV(tokens, I64, 1 << 20)), "talon_kv_append_bf16_v8"),
    LAUNCH(OP_KV, "kv_append HND -> v8", ONE(KV(layout, ENUM, TALON_KV_HND)),
           "talon_kv_append_bf16_v8"),
    LAUNCH(OP_KV, "kv_append HND fp8, page 256", ONE(KV(layout, ENUM, TALON_KV_HND),
           KV(cache_dtype, ENUM, TALON_DTYPE_FP8_E4M3), KV(page_size, I64, 256)),
           "talon_kv_append_fp8_bf16_v8"),
    LAUNCH(OP_KV, "kv_append HND, D 100 (Hk*D 800) -> element-wise: a unit would span heads",
           ONE(KV(layout, ENUM, TALON_KV_HND), KV(head_dim, I64, 100)), "talon_kv_append_bf16"),
    LAUNCH(OP_KV, "kv_append NHD, D 100 (Hk*D 800) -> v8", ONE(KV(head_dim, I64, 100)),
           "talon_kv_append_bf16_v8"),
};

/* The params the op must pass, from the public contract; returns the grid size. */
static int64_t expected_launch(const talon_kv_append_args *k, const char *symbol, void *params) {
    const int v8 = strstr(symbol, "_v8") != NULL;
    talon__kv_params *p = (talon__kv_params *)params;
    const int64_t row = k->num_kv_heads * k->head_dim;
    memset(params, 0, 256);
    p->k_cache = k->k_cache; p->v_cache = k->v_cache; p->k = k->k; p->v = k->v;
    p->slots = k->slot_mapping;
    p->k_stride = k->k_stride ? k->k_stride : row;
    p->v_stride = k->v_stride ? k->v_stride : row;
    p->num_slots = k->num_pages * k->page_size;
    p->row = row;
    /* NHD: [pages, page_size, Hk, D]; HND: [pages, Hk, page_size, D] (elements) */
    p->page_rows = k->layout == TALON_KV_HND ? k->page_size * k->num_kv_heads : k->page_size;
    p->slot_stride = k->layout == TALON_KV_HND ? k->head_dim : row;
    p->head_stride = k->layout == TALON_KV_HND ? k->page_size * k->head_dim : k->head_dim;
    p->head_dim = (uint32_t)k->head_dim;
    p->page_shift = (uint32_t)log2((double)k->page_size);
    p->row_vecs = (uint32_t)(row / (v8 ? 8 : 1));
    {   /* d = units per token; l = ceil(log2 d), m = floor(2^32 (2^l - d) / d) + 1 */
        const uint64_t d = 2ull * p->row_vecs;
        p->div_l = d > 1 ? 64u - (uint32_t)__builtin_clzll(d - 1) : 0u;
        p->div_m = (uint32_t)(((1ull << p->div_l) - d) * (1ull << 32) / d + 1);
    }
    p->units = (uint32_t)(2 * p->row_vecs * k->tokens);
    if (k->cache_dtype == TALON_DTYPE_FP8_E4M3) {
        ref_fp8_quant(k->k_scale ? k->k_scale : 1.0f, p->quant[0]);
        ref_fp8_quant(k->v_scale ? k->v_scale : 1.0f, p->quant[1]);
    }
    return (p->units + 256 * TALON__KV_UNROLL - 1) / (256 * TALON__KV_UNROLL);
}

static void test_launch(void **state) {
    const launch_row *row = (const launch_row *)*state;
    unsigned char want[256];
    int64_t grid;
    talon_kv_append_args a;
    valid_args(&a);
    apply_sets(&a, row->set, MAX_SETS);
    assert_int_equal(talon_kv_append(g_ctx, STREAM, &a), TALON_SUCCESS);
    /* rope and kv_append are families of their own: only the op's image loads */
    assert_int_equal(fake.load_calls[TALON__IMG_kv_cache], 1);
    assert_int_equal(fake.load_calls[TALON__IMG_rope], 0);
    grid = expected_launch(&a, row->symbol, want);
    assert_single_launch(row->symbol, grid, STREAM, want, sizeof(talon__kv_params));
    assert_int_equal(fake.last.block[0], 256);
    assert_int_equal(fake.last.smem, 0);
    {   /* the kernel's division by the units of a token */
        const talon__kv_params *p = (const talon__kv_params *)fake.last.params;
        const uint32_t d = 2 * p->row_vecs, ns[] = {0, 1, d - 1, d, d + 1, 3 * d + 7,
                                                    p->units - 1, 0x7ffffdffu};
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
            assert_int_equal((uint32_t)((((uint64_t)ns[i] * p->div_m >> 32) + ns[i]) >> p->div_l),
                             ns[i] / d);
    }
}

/* ================================================================ main */
int main(void) {
    size_t i;
    for (i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; i++)
        test_add(bad_rows[i].name, test_invalid_argument, &bad_rows[i]);
    for (i = 0; i < sizeof launch_rows / sizeof launch_rows[0]; i++)
        test_add(launch_rows[i].name, test_launch, &launch_rows[i]);
    return test_run("test_kv_cache");
}
