/* Dispatcher tests on a fake CUDA driver (no GPU) for talon_moe_gemm and talon_grouped_gemm:
   one validation error per rule (status, message naming the field and its value, nothing
   encoded or launched), the plans as pure functions, and the launch of each kernel variant
   (symbol, persistent grid, the params and the tensor maps the kernel gets). */
#include "fake_driver.h"
#include "table_rows.h"
#include <math.h>

/* table_rows.h's op column; OP_GROUPED_MASKED, OP_GROUPED_FP8: talon_grouped_gemm from the
   masked layout's or fp8's valid args */
typedef enum { OP_MOE_GEMM, OP_GROUPED_GEMM, OP_GROUPED_MASKED, OP_GROUPED_FP8 } op_id;
static const char *const op_names[] = {"talon_moe_gemm", "talon_grouped_gemm", "talon_grouped_gemm",
                                       "talon_grouped_gemm"};

#define P_A 0x10000000ull
#define P_B 0x100000000ull
#define P_D 0x20000000ull
#define P_SORTED 0x40000000ull
#define P_EXPERTS 0x41000000ull
#define P_POST 0x42000000ull
#define P_W 0x43000000ull
#define P_AS 0x44000000ull
#define P_BS 0x45000000ull
#define P_BIAS 0x46000000ull
#define STREAM ((CUstream)(uintptr_t)0x5157)

/* Qwen3-30B-A3B's gate/up projection over 4096 tokens: hidden [4096, 2048] gathered by token,
   w13 [128, 2 x 768, 2048], h [sorted, 768] in sorted order. */
static void valid_args(talon_moe_gemm_args *a) {
    memset(a, 0, sizeof *a);
    a->d = P_D; a->a = P_A; a->b = P_B;
    a->sorted_token_ids = P_SORTED; a->expert_ids = P_EXPERTS; a->num_tokens_post_padded = P_POST;
    a->tokens = 4096; a->topk = 8; a->experts = 128; a->block_size = 128;
    a->sorted_capacity = 4096 * 8 + 128 * 127; a->expert_ids_capacity = (4096 * 8 + 128 * 127 + 127) / 128;
    a->n = 768; a->k = 2048;
    a->a_rows = TALON_MOE_ROWS_TOKEN; a->d_rows = TALON_MOE_ROWS_SORTED;
    a->act = TALON_GEMM_ACT_SILU; a->gated = 1;
}

#define M(f, k, v) SET(talon_moe_gemm_args, f, k, v)
#define BAD(NAME, SETS, FIELD, VALUE)                                                          \
    {.name = "moe_gemm: " NAME, .op = OP_MOE_GEMM, .kind = BAD_FIELDS, .set = SETS,            \
     .field = FIELD, .value = VALUE}

/* ================================================================ validation, one per rule */
static const bad_row bad_rows[] = {
    {.name = "moe_gemm: ctx NULL", .op = OP_MOE_GEMM, .kind = BAD_CTX, .field = "ctx", .value = "NULL"},
    {.name = "moe_gemm: args NULL", .op = OP_MOE_GEMM, .kind = BAD_ARGS, .field = "args", .value = "NULL"},
    BAD("dtype F32", ONE(M(dtype, ENUM, TALON_DTYPE_F32)), "args->dtype", "2"),
    BAD("a_rows 3", ONE(M(a_rows, ENUM, 3)), "args->a_rows", "3"),
    BAD("a_rows -1", ONE(M(a_rows, ENUM, -1)), "args->a_rows", "-1"),
    BAD("d_rows TOKEN", ONE(M(d_rows, ENUM, TALON_MOE_ROWS_TOKEN)), "args->d_rows", "1"),
    BAD("d_rows 3", ONE(M(d_rows, ENUM, 3)), "args->d_rows", "3"),
    BAD("tokens 0", ONE(M(tokens, I64, 0)), "args->tokens", "0"),
    BAD("tokens 65537", ONE(M(tokens, I64, 65537)), "args->tokens", "65537"),
    BAD("topk 0", ONE(M(topk, I64, 0)), "args->topk", "0"),
    BAD("topk 65", ONE(M(topk, I64, 65)), "args->topk", "65"),
    BAD("experts 0", ONE(M(experts, I64, 0)), "args->experts", "0"),
    BAD("experts 513", ONE(M(experts, I64, 513)), "args->experts", "513"),
    BAD("block_size 64", ONE(M(block_size, I64, 64)), "args->block_size", "64"),
    BAD("block_size 0", ONE(M(block_size, I64, 0)), "args->block_size", "0"),
    BAD("sorted_capacity one below the worst case", ONE(M(sorted_capacity, I64, 49023)),
        "args->sorted_capacity", "49023"),
    BAD("sorted_capacity 2^31", ONE(M(sorted_capacity, I64, 2147483648)), "args->sorted_capacity",
        "2147483648"),
    BAD("expert_ids_capacity one below the worst case", ONE(M(expert_ids_capacity, I64, 382)),
        "args->expert_ids_capacity", "382"),
    BAD("n 0", ONE(M(n, I64, 0)), "args->n", "0"),
    BAD("n 772 (not a multiple of 8)", ONE(M(n, I64, 772)), "args->n", "772"),
    BAD("n 2^20 + 8", ONE(M(n, I64, 1048584)), "args->n", "1048584"),
    BAD("k 4 (below 8)", ONE(M(k, I64, 4)), "args->k", "4"),
    BAD("k 2052 (not a multiple of 8)", ONE(M(k, I64, 2052)), "args->k", "2052"),
    BAD("gated 2", ONE(M(gated, INT, 2)), "args->gated", "2"),
    BAD("act 6", ONE(M(act, ENUM, 6)), "args->act", "6"),
    BAD("act -1", ONE(M(act, ENUM, -1)), "args->act", "-1"),
    BAD("act CLAMPED_SWIGLU not gated", ONE(M(act, ENUM, TALON_GEMM_ACT_CLAMPED_SWIGLU),
        M(gated, INT, 0), M(act_alpha, F32, 1.702), M(act_limit, F32, 7)), "args->gated", "0"),
    BAD("act CLAMPED_SWIGLU alpha 0", ONE(M(act, ENUM, TALON_GEMM_ACT_CLAMPED_SWIGLU),
        M(act_limit, F32, 7)), "args->act_alpha", "0"),
    BAD("act CLAMPED_SWIGLU alpha -1", ONE(M(act, ENUM, TALON_GEMM_ACT_CLAMPED_SWIGLU),
        M(act_alpha, F32, -1), M(act_limit, F32, 7)), "args->act_alpha", "-1"),
    BAD("act CLAMPED_SWIGLU alpha inf", ONE(M(act, ENUM, TALON_GEMM_ACT_CLAMPED_SWIGLU),
        M(act_alpha, F32, INFINITY), M(act_limit, F32, 7)), "args->act_alpha", "inf"),
    BAD("act CLAMPED_SWIGLU alpha NaN", ONE(M(act, ENUM, TALON_GEMM_ACT_CLAMPED_SWIGLU),
        M(act_alpha, F32, NAN), M(act_limit, F32, 7)), "args->act_alpha", "nan"),
    BAD("act CLAMPED_SWIGLU limit 0", ONE(M(act, ENUM, TALON_GEMM_ACT_CLAMPED_SWIGLU),
        M(act_alpha, F32, 1.702)), "args->act_limit", "0"),
    BAD("act CLAMPED_SWIGLU limit -7", ONE(M(act, ENUM, TALON_GEMM_ACT_CLAMPED_SWIGLU),
        M(act_alpha, F32, 1.702), M(act_limit, F32, -7)), "args->act_limit", "-7"),
    BAD("act CLAMPED_SWIGLU limit NaN", ONE(M(act, ENUM, TALON_GEMM_ACT_CLAMPED_SWIGLU),
        M(act_alpha, F32, 1.702), M(act_limit, F32, NAN)), "args->act_limit", "nan"),
    BAD("act_alpha with SILU", ONE(M(act_alpha, F32, 1.702)), "args->act_alpha", "1.702"),
    BAD("act_limit with NONE", ONE(M(act, ENUM, TALON_GEMM_ACT_NONE), M(act_limit, F32, 7)),
        "args->act_limit", "7"),
    BAD("bias 2-byte aligned", ONE(M(bias, PTR, P_BIAS + 2)), "args->bias", "0x46000002"),
    /* bias: 128 experts x 1536 x 2 bytes = 0x60000 */
    BAD("bias's end inside d", ONE(M(bias, PTR, P_D - 0x60000 + 4)), "args->bias", "0x1ffa0004"),
    BAD("lda 2040 (shorter than k)", ONE(M(lda, I64, 2040)), "args->lda", "2040"),
    BAD("lda 2052 (not a multiple of 8)", ONE(M(lda, I64, 2052)), "args->lda", "2052"),
    BAD("ldb 2049", ONE(M(ldb, I64, 2049)), "args->ldb", "2049"),
    BAD("ldd 760 (shorter than n)", ONE(M(ldd, I64, 760)), "args->ldd", "760"),
    BAD("ldd 2^36 + 8", ONE(M(ldd, I64, 68719476744.0)), "args->ldd", "68719476744"),
    BAD("d NULL", ONE(M(d, PTR, 0)), "args->d", "NULL"),
    BAD("d 8-byte aligned", ONE(M(d, PTR, P_D + 8)), "args->d", "0x20000008"),
    BAD("a NULL", ONE(M(a, PTR, 0)), "args->a", "NULL"),
    BAD("a 2-byte aligned", ONE(M(a, PTR, P_A + 2)), "args->a", "0x10000002"),
    BAD("b NULL", ONE(M(b, PTR, 0)), "args->b", "NULL"),
    BAD("b 8-byte aligned", ONE(M(b, PTR, P_B + 8)), "args->b", "0x100000008"),
    BAD("sorted_token_ids NULL", ONE(M(sorted_token_ids, PTR, 0)), "args->sorted_token_ids", "NULL"),
    BAD("sorted_token_ids 2-byte aligned", ONE(M(sorted_token_ids, PTR, P_SORTED + 2)),
        "args->sorted_token_ids", "0x40000002"),
    BAD("expert_ids NULL", ONE(M(expert_ids, PTR, 0)), "args->expert_ids", "NULL"),
    BAD("num_tokens_post_padded NULL", ONE(M(num_tokens_post_padded, PTR, 0)),
        "args->num_tokens_post_padded", "NULL"),
    BAD("num_tokens_post_padded 2-byte aligned", ONE(M(num_tokens_post_padded, PTR, P_POST + 2)),
        "args->num_tokens_post_padded", "0x42000002"),
    BAD("topk_weights 2-byte aligned", ONE(M(topk_weights, PTR, P_W + 2)), "args->topk_weights",
        "0x43000002"),
    /* d SORTED spans 49024 rows x 768 x 2 bytes = 0x47d0000 from P_D */
    BAD("a overlaps d", ONE(M(a, PTR, P_D + 0x1000)), "args->a", "0x20001000"),
    BAD("b overlaps d's last row", ONE(M(b, PTR, P_D + 0x47d0000 - 16)), "args->b", "0x247cfff0"),
    BAD("d PAIR (32768 rows) overlapping a", ONE(M(d_rows, ENUM, TALON_MOE_ROWS_PAIR),
        M(d, PTR, P_A - 32768 * 768 * 2 + 16)), "args->a", "0x10000000"),
    BAD("sorted_token_ids inside d", ONE(M(sorted_token_ids, PTR, P_D + 0x400000)),
        "args->sorted_token_ids", "0x20400000"),
    BAD("expert_ids inside d", ONE(M(expert_ids, PTR, P_D + 64)), "args->expert_ids", "0x20000040"),
    BAD("num_tokens_post_padded inside d", ONE(M(num_tokens_post_padded, PTR, P_D + 4)),
        "args->num_tokens_post_padded", "0x20000004"),
    BAD("2^30 tiles and more (n 2^20, sorted_capacity 2^31 - 1)", ONE(M(n, I64, 1048576),
        M(gated, INT, 0), M(sorted_capacity, I64, 2147483647), M(expert_ids_capacity, I64, 16777216),
        M(d_rows, ENUM, TALON_MOE_ROWS_PAIR), M(d, PTR, 0x100000000000ull)), "args->n", "1048576"),
    BAD("topk_weights inside d", ONE(M(topk_weights, PTR, P_D + 0x47d0000 - 4)),
        "args->topk_weights", "0x247cfffc"),
    /* fp8: TENSOR, ROW or BLOCK scales (d bf16, the same span) */
    BAD("dtype fp8 with scale NONE", ONE(M(dtype, ENUM, TALON_DTYPE_FP8_E4M3)), "args->scale", "0"),
    BAD("fp8 scale 4", ONE(M(dtype, ENUM, TALON_DTYPE_FP8_E4M3), M(scale, ENUM, 4),
        M(a_scale, PTR, P_AS), M(b_scale, PTR, P_BS)), "args->scale", "4"),
    BAD("scale ROW with bf16", ONE(M(scale, ENUM, TALON_GEMM_SCALE_ROW)), "args->scale", "2"),
    BAD("a_scale with bf16", ONE(M(a_scale, PTR, P_AS)), "args->a_scale", "0x44000000"),
    BAD("fp8 a_scale NULL", ONE(M(dtype, ENUM, TALON_DTYPE_FP8_E4M3),
        M(scale, ENUM, TALON_GEMM_SCALE_ROW), M(b_scale, PTR, P_BS)), "args->a_scale", "NULL"),
    BAD("fp8 ROW b_scale 4-byte aligned", ONE(M(dtype, ENUM, TALON_DTYPE_FP8_E4M3),
        M(scale, ENUM, TALON_GEMM_SCALE_ROW), M(a_scale, PTR, P_AS), M(b_scale, PTR, P_BS + 4)),
        "args->b_scale", "0x45000004"),
    BAD("fp8 lda 2056 (not a multiple of 16)", ONE(M(dtype, ENUM, TALON_DTYPE_FP8_E4M3),
        M(scale, ENUM, TALON_GEMM_SCALE_TENSOR), M(a_scale, PTR, P_AS), M(b_scale, PTR, P_BS),
        M(lda, I64, 2056)), "args->lda", "2056"),
    BAD("fp8 ROW a_scale inside d", ONE(M(dtype, ENUM, TALON_DTYPE_FP8_E4M3),
        M(scale, ENUM, TALON_GEMM_SCALE_ROW), M(a_scale, PTR, P_D + 0x100), M(b_scale, PTR, P_BS)),
        "args->a_scale", "0x20000100"),
    /* ROW b_scale: 128 experts x 1536 rows x 4 bytes = 0xc0000 */
    BAD("fp8 ROW b_scale's end inside d", ONE(M(dtype, ENUM, TALON_DTYPE_FP8_E4M3),
        M(scale, ENUM, TALON_GEMM_SCALE_ROW), M(a_scale, PTR, P_AS),
        M(b_scale, PTR, P_D - 0xc0000 + 8)), "args->b_scale", "0x1ff40008"),
    /* BLOCK: a_scale [16 k-blocks, 4096 token rows] (0x40000 bytes), b_scale [128 experts,
       12 row blocks, 16 k-blocks] (0x18000 bytes); gated n a multiple of 64 */
    BAD("fp8 BLOCK a_scale's end inside d", ONE(M(dtype, ENUM, TALON_DTYPE_FP8_E4M3),
        M(scale, ENUM, TALON_GEMM_SCALE_BLOCK), M(a_scale, PTR, P_D - 0x40000 + 4),
        M(b_scale, PTR, P_BS)), "args->a_scale", "0x1ffc0004"),
    BAD("fp8 BLOCK b_scale's end inside d", ONE(M(dtype, ENUM, TALON_DTYPE_FP8_E4M3),
        M(scale, ENUM, TALON_GEMM_SCALE_BLOCK), M(a_scale, PTR, P_AS),
        M(b_scale, PTR, P_D - 0x18000 + 4)), "args->b_scale", "0x1ffe8004"),
    BAD("fp8 BLOCK gated n 96", ONE(M(dtype, ENUM, TALON_DTYPE_FP8_E4M3),
        M(scale, ENUM, TALON_GEMM_SCALE_BLOCK), M(a_scale, PTR, P_AS), M(b_scale, PTR, P_BS),
        M(n, I64, 96)), "args->n", "96"),
};

static void test_invalid_argument(void **state) {
    const bad_row *row = (const bad_row *)*state;
    talon_moe_gemm_args a;
    valid_args(&a);
    apply_sets(&a, row->set, MAX_SETS);
    assert_rejected(talon_moe_gemm(row->kind == BAD_CTX ? NULL : g_ctx, STREAM,
                                   row->kind == BAD_ARGS ? NULL : &a),
                    op_names[row->op], row->field, row->value);
    assert_int_equal(fake.encodes, 0);
}

/* The smallest and the largest accepted shapes launch. */
static void test_accepts_edges(void **state) {
    talon_moe_gemm_args a;
    (void)state;
    valid_args(&a);
    a.tokens = 1; a.topk = 1; a.experts = 1; a.sorted_capacity = 128; a.expert_ids_capacity = 1;
    a.n = 8; a.k = 8;
    assert_int_equal(talon_moe_gemm(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.enc.rank, 3); /* b's up view: 3D with one expert too */
    assert_int_equal(fake.enc.dims[2], 1);
    valid_args(&a);
    a.tokens = 65536; a.topk = 64; a.experts = 512;
    a.sorted_capacity = 65536LL * 64 + 512 * 127; a.expert_ids_capacity = 1 << 24;
    a.d = 0x1000000000ull; a.b = 0x4000000000ull;
    assert_int_equal(talon_moe_gemm(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.launches, 2);
}

static void test_encode_failure(void **state) {
    talon_moe_gemm_args a;
    (void)state;
    valid_args(&a);
    fake.encode_result = CUDA_ERROR_INVALID_VALUE;
    assert_int_equal(talon_moe_gemm(g_ctx, STREAM, &a), TALON_ERROR_DRIVER);
    assert_contains(talon_last_error(), "cuTensorMapEncodeTiled(args->d)");
    assert_int_equal(fake.launches, 0);
}

/* DeepSeek-V3's down projection at T 1 (8 blocks, n 7168: 56 tiles of 128 columns) on 132
   SMs: the kernel choice and the padding rule. */
static void expect_decode_plan(const talon__moe_gemm_plan *pl, int swap_rows, int skip_padding) {
    assert_int_equal(pl->swap_rows, swap_rows);
    assert_int_equal(pl->skip_padding, skip_padding);
    assert_int_equal(pl->blocks, 8);
    assert_int_equal(pl->tiles_n, 56);
    assert_int_equal(pl->grid, 132);
}

/* The transposed kernel's chunk rows (0: the 128-row kernel) for a gated n 2048 with moe_align's
   capacities of the arguments. */
static int chunk_rows_of(int64_t tokens, int64_t topk, int64_t experts, int block) {
    const int64_t sorted = tokens * topk + experts * 127;
    talon__moe_gemm_plan pl;
    talon__moe_gemm_plan_make(tokens, topk, experts, 2048, 1, block, sorted, (sorted + 127) / 128,
                              0, 132, &pl);
    return pl.swap_rows;
}

/* The plan from host values alone. */
static void test_plan(void **state) {
    talon__moe_gemm_plan pl;
    (void)state;
    /* Qwen3-30B-A3B gate/up, T 4096: 256 busy blocks x 6 column tiles of 128 (bn 256) */
    talon__moe_gemm_plan_make(4096, 8, 128, 768, 1, 0, 49024, 383, 0, 132, &pl);
    assert_int_equal(pl.bn, 256);
    assert_int_equal(pl.blocks, 383);
    assert_int_equal(pl.tiles_n, 6);
    assert_int_equal(pl.group, 16);
    assert_int_equal(pl.grid, 132);
    assert_int_equal(pl.skip_padding, 0); /* experts fill several blocks: pairs share weights */
    assert_int_equal(pl.swap_rows, 0);
    /* DeepSeek-V3 down (n 7168), T 1, a and d both sorted: one busy block; 56 tiles of 128
       fill more SMs than 28 of 256 */
    talon__moe_gemm_plan_make(1, 8, 256, 7168, 0, 0, 8 + 8 * 127, 8, 1, 132, &pl);
    assert_int_equal(pl.bn, 128);
    expect_decode_plan(&pl, 0, 1);
    /* the same with a gathered a or pair rows of d: the transposed kernel, 128 columns a tile,
       chunks of 16 slots */
    talon__moe_gemm_plan_make(1, 8, 256, 7168, 0, 0, 8 + 8 * 127, 8, 0, 132, &pl);
    expect_decode_plan(&pl, 16, 0);
    /* chunk rows: the smallest of 16, 32, 64 that holds twice an expert's average rows
       (tokens x topk / experts, rounded up), or the tokens; none past 64 tokens. 128 experts,
       top 8: at most 8 rows */
    assert_int_equal(chunk_rows_of(16, 8, 128, 0), 16);
    assert_int_equal(chunk_rows_of(33, 8, 128, 0), 16);
    assert_int_equal(chunk_rows_of(64, 8, 128, 0), 16);
    assert_int_equal(chunk_rows_of(65, 8, 128, 0), 0);
    talon__moe_gemm_plan_make(64, 8, 128, 2048, 1, 0, 512 + 128 * 127, 131, 0, 132, &pl);
    assert_int_equal(pl.tiles_n, 16); /* gated: 128 output columns from 256 rows of b */
    /* 8 experts, top 2 (Mixtral): 64 tokens, 16 rows each on average: 32; 33 tokens: 2 x 9 */
    assert_int_equal(chunk_rows_of(64, 2, 8, 0), 32);
    assert_int_equal(chunk_rows_of(33, 2, 8, 0), 32);
    assert_int_equal(chunk_rows_of(32, 2, 8, 0), 16);
    /* every token to each of 8 experts: twice the tokens, so the tokens: 17 -> 32, 33 -> 64 */
    assert_int_equal(chunk_rows_of(17, 8, 8, 0), 32);
    assert_int_equal(chunk_rows_of(33, 8, 8, 0), 64);
    assert_int_equal(chunk_rows_of(64, 8, 8, 0), 64);
    /* fp8 block scales: transposed at decode as the others, up to 32 tokens; gated n not a
       multiple of 128: bn 128 */
    assert_int_equal(chunk_rows_of(16, 8, 128, 1), 16);
    assert_int_equal(chunk_rows_of(32, 8, 128, 1), 16);
    assert_int_equal(chunk_rows_of(32, 8, 16, 1), 32); /* 16 experts: 16 rows each on average */
    assert_int_equal(chunk_rows_of(33, 8, 128, 1), 0); /* past 32 tokens: the 128-row kernel */
    talon__moe_gemm_plan_make(4096, 8, 128, 960, 1, 1, 49024, 383, 0, 132, &pl);
    assert_int_equal(pl.bn, 128);
    talon__moe_gemm_plan_make(4096, 8, 128, 960, 1, 0, 49024, 383, 0, 132, &pl);
    assert_int_equal(pl.bn, 256);
    /* padding halves skip their products up to 128 tokens (an expert fills one block) */
    talon__moe_gemm_plan_make(128, 8, 128, 2048, 0, 0, 1024 + 128 * 127, 128 * 2, 0, 132, &pl);
    assert_int_equal(pl.skip_padding, 1);
    talon__moe_gemm_plan_make(129, 8, 128, 2048, 0, 0, 1032 + 128 * 127, 128 * 2, 0, 132, &pl);
    assert_int_equal(pl.skip_padding, 0);
    /* a narrow gated n: 64 output columns fill bn 128's tiles exactly, 256's half */
    talon__moe_gemm_plan_make(100, 2, 8, 64, 1, 0, 100 * 2 + 8 * 127, 10, 0, 132, &pl);
    assert_int_equal(pl.bn, 128);
    assert_int_equal(pl.tiles_n, 1);
    assert_int_equal(pl.blocks, 9); /* 1216 slots: 9 whole blocks */
    assert_int_equal(pl.grid, 8);   /* whole clusters of 2 */
    /* blocks: no more than end inside sorted_capacity */
    talon__moe_gemm_plan_make(4, 2, 8, 256, 0, 0, 200, 100, 1, 132, &pl);
    assert_int_equal(pl.blocks, 1);
    assert_int_equal(pl.bn, 128);
    assert_int_equal(pl.grid, 2);
    talon__moe_gemm_plan_make(4, 2, 8, 256, 0, 0, 1024, 100, 1, 132, &pl);
    assert_int_equal(pl.blocks, 8);
    talon__moe_gemm_plan_make(4, 2, 8, 256, 0, 0, 200, 100, 0, 132, &pl); /* transposed: no clusters */
    assert_int_equal(pl.blocks, 1);
    assert_int_equal(pl.tiles_n, 2);
    assert_int_equal(pl.grid, 2);
    /* the SM count bounds the grid */
    talon__moe_gemm_plan_make(4096, 8, 128, 768, 1, 0, 49024, 383, 0, 78, &pl);
    assert_int_equal(pl.grid, 78);
}

typedef struct moe_launch_row {
    const char *name;
    field_set set[MAX_SETS];
    const char *symbol;
    int grid, tiles_n;
} moe_launch_row;
#define LAUNCH(NAME, SETS, SYM, GRID, TN) {"moe_gemm launches " NAME, SETS, SYM, GRID, TN}
/* `t` tokens with moe_align's capacities of `blocks` blocks (3 of a row's edits) */
#define TOKENS(t, blocks)                                                                      \
    M(tokens, I64, t), M(sorted_capacity, I64, (blocks) * 128), M(expert_ids_capacity, I64, blocks)
/* fp8 inputs with scales of kind SC (4 of a row's edits) */
#define FP8_SCALED(SC)                                                                         \
    M(dtype, ENUM, TALON_DTYPE_FP8_E4M3), M(scale, ENUM, SC), M(a_scale, PTR, P_AS),           \
        M(b_scale, PTR, P_BS)

static const moe_launch_row launch_rows[] = {
    LAUNCH("bf16 gate/up, token rows -> sorted, gated 256", NONE, "talon_moe_gemm_bf16_gated_256",
           132, 6),
    LAUNCH("f16 gate/up", ONE(M(dtype, ENUM, TALON_DTYPE_F16)), "talon_moe_gemm_f16_gated_256",
           132, 6),
    LAUNCH("bf16 down, sorted -> pair rows with weights, 256",
           ONE(M(gated, INT, 0), M(act, ENUM, TALON_GEMM_ACT_NONE), M(n, I64, 2048), M(k, I64, 768),
               M(a_rows, ENUM, TALON_MOE_ROWS_SORTED), M(d_rows, ENUM, TALON_MOE_ROWS_PAIR)),
           "talon_moe_gemm_bf16_256", 132, 8),
    LAUNCH("f16 pair rows -> pair rows, n 72: 128",
           ONE(M(dtype, ENUM, TALON_DTYPE_F16), M(gated, INT, 0), M(n, I64, 72),
               M(a_rows, ENUM, TALON_MOE_ROWS_PAIR), M(d_rows, ENUM, TALON_MOE_ROWS_PAIR)),
           "talon_moe_gemm_f16_128", 132, 1),
    /* up to 64 tokens: the transposed kernel, tiles of 128 output columns, a chunk of the
       smallest of 16, 32, 64 slots that holds twice an expert's average rows (128 experts,
       top 8: 16) or the tokens */
    LAUNCH("bf16 gated n 64, 16 tokens (one tile)", ONE(M(n, I64, 64), TOKENS(16, 128)),
           "talon_moe_gemm_bf16_gated_swap16", 128, 1),
    LAUNCH("bf16 gate/up, 33 tokens", ONE(TOKENS(33, 130)),
           "talon_moe_gemm_bf16_gated_swap16", 132, 6),
    LAUNCH("bf16 gate/up, 33 tokens over 8 experts: chunks of 64",
           ONE(TOKENS(33, 130), M(experts, I64, 8)), "talon_moe_gemm_bf16_gated_swap64", 132, 6),
    LAUNCH("bf16 down, 64 tokens, sorted -> pair rows",
           ONE(M(gated, INT, 0), M(act, ENUM, TALON_GEMM_ACT_NONE), M(n, I64, 2048), M(k, I64, 768),
               M(a_rows, ENUM, TALON_MOE_ROWS_SORTED), M(d_rows, ENUM, TALON_MOE_ROWS_PAIR),
               TOKENS(64, 131)),
           "talon_moe_gemm_bf16_swap16", 132, 16),
    LAUNCH("f16 T 1, pair rows -> pair rows, n 72",
           ONE(M(dtype, ENUM, TALON_DTYPE_F16), M(gated, INT, 0), M(n, I64, 72),
               M(a_rows, ENUM, TALON_MOE_ROWS_PAIR), M(d_rows, ENUM, TALON_MOE_ROWS_PAIR),
               TOKENS(1, 8)),
           "talon_moe_gemm_f16_swap16", 8, 1),
    LAUNCH("bf16 16 tokens, sorted -> sorted: the 128-row kernel",
           ONE(M(gated, INT, 0), M(n, I64, 2048), M(a_rows, ENUM, TALON_MOE_ROWS_SORTED),
               TOKENS(16, 128)),
           "talon_moe_gemm_bf16_128", 132, 16),
    /* fp8 with scales per tensor or row: the 128-row kernel past 64 tokens (gathered a too),
       the transposed one at up to 64 (not with a and d both SORTED) */
    LAUNCH("fp8 row gate/up, token rows -> sorted",
           ONE(FP8_SCALED(TALON_GEMM_SCALE_ROW)),
           "talon_moe_gemm_e4m3_row_gated_256", 132, 6),
    LAUNCH("fp8 tensor, 16 tokens, pair rows: transposed",
           ONE(FP8_SCALED(TALON_GEMM_SCALE_TENSOR), M(gated, INT, 0), M(n, I64, 2048),
               M(d_rows, ENUM, TALON_MOE_ROWS_PAIR), TOKENS(16, 128)),
           "talon_moe_gemm_e4m3_row_swap16", 132, 16),
    LAUNCH("fp8 row gate/up, 33 tokens: transposed",
           ONE(FP8_SCALED(TALON_GEMM_SCALE_ROW), TOKENS(33, 130)),
           "talon_moe_gemm_e4m3_row_gated_swap16", 132, 6),
    LAUNCH("fp8 row gate/up, 33 tokens over 8 experts: chunks of 64",
           ONE(FP8_SCALED(TALON_GEMM_SCALE_ROW), TOKENS(33, 130), M(experts, I64, 8)),
           "talon_moe_gemm_e4m3_row_gated_swap64", 132, 6),
    /* fp8 block scales: the 128-row kernel past 32 tokens (gated n not a multiple of 128: bn
       128), the transposed one at up to 32 */
    LAUNCH("fp8 block gate/up, token rows -> sorted",
           ONE(FP8_SCALED(TALON_GEMM_SCALE_BLOCK), M(n, I64, 1024)),
           "talon_moe_gemm_e4m3_block_gated_256", 132, 8),
    LAUNCH("fp8 block gate/up n 960 (not a multiple of 128): 128",
           ONE(FP8_SCALED(TALON_GEMM_SCALE_BLOCK), M(n, I64, 960)),
           "talon_moe_gemm_e4m3_block_gated_128", 132, 15),
    LAUNCH("fp8 row gate/up n 960: 256",
           ONE(FP8_SCALED(TALON_GEMM_SCALE_ROW), M(n, I64, 960)),
           "talon_moe_gemm_e4m3_row_gated_256", 132, 8),
    LAUNCH("fp8 block, 16 tokens, token -> pair rows: transposed",
           ONE(FP8_SCALED(TALON_GEMM_SCALE_BLOCK), M(gated, INT, 0), M(n, I64, 2048),
               M(d_rows, ENUM, TALON_MOE_ROWS_PAIR), TOKENS(16, 128)),
           "talon_moe_gemm_e4m3_block_swap16", 132, 16),
    LAUNCH("fp8 block gate/up n 960, 16 tokens: transposed",
           ONE(FP8_SCALED(TALON_GEMM_SCALE_BLOCK), M(n, I64, 960), TOKENS(16, 128)),
           "talon_moe_gemm_e4m3_block_gated_swap16", 132, 8),
    LAUNCH("fp8 block gate/up, 32 tokens: transposed",
           ONE(FP8_SCALED(TALON_GEMM_SCALE_BLOCK), TOKENS(32, 130)),
           "talon_moe_gemm_e4m3_block_gated_swap16", 132, 6),
    LAUNCH("fp8 block gate/up, 32 tokens over 16 experts: chunks of 32",
           ONE(FP8_SCALED(TALON_GEMM_SCALE_BLOCK), TOKENS(32, 130), M(experts, I64, 16)),
           "talon_moe_gemm_e4m3_block_gated_swap32", 132, 6),
    LAUNCH("fp8 block gate/up, 33 tokens: the 128-row kernel",
           ONE(FP8_SCALED(TALON_GEMM_SCALE_BLOCK), TOKENS(33, 130)),
           "talon_moe_gemm_e4m3_block_gated_128", 132, 12),
    LAUNCH("fp8 row, 16 tokens, sorted -> sorted: the 128-row kernel",
           ONE(FP8_SCALED(TALON_GEMM_SCALE_ROW), M(gated, INT, 0), M(n, I64, 2048),
               M(a_rows, ENUM, TALON_MOE_ROWS_SORTED), TOKENS(16, 128)),
           "talon_moe_gemm_e4m3_row_128", 132, 16),
    /* gpt-oss's epilogue (bias, CLAMPED_SWIGLU): the same kernels, the params carry them */
    LAUNCH("bf16 gate/up with bias and CLAMPED_SWIGLU",
           ONE(M(bias, PTR, P_BIAS), M(act, ENUM, TALON_GEMM_ACT_CLAMPED_SWIGLU),
               M(act_alpha, F32, 1.702), M(act_limit, F32, 7)),
           "talon_moe_gemm_bf16_gated_256", 132, 6),
    LAUNCH("bf16 gate/up with bias and CLAMPED_SWIGLU, 16 tokens: transposed",
           ONE(M(bias, PTR, P_BIAS), M(act, ENUM, TALON_GEMM_ACT_CLAMPED_SWIGLU),
               M(act_alpha, F32, 1.702), M(act_limit, F32, INFINITY), TOKENS(16, 128)),
           "talon_moe_gemm_bf16_gated_swap16", 132, 6),
};

static void test_launch(void **state) {
    const moe_launch_row *row = (const moe_launch_row *)*state;
    const talon__moe_gemm_params *p;
    talon_moe_gemm_args a;
    CUdeviceptr map_base;
    const int bn = strstr(row->symbol, "_256") ? 256 : 128;
    const int swap = strstr(row->symbol, "swap64") ? 64 : strstr(row->symbol, "swap32") ? 32
                     : strstr(row->symbol, "swap16") ? 16 : 0;
    int64_t es; /* bytes an element of a and b */
    int i, maps;
    valid_args(&a);
    apply_sets(&a, row->set, MAX_SETS);
    es = a.dtype == TALON_DTYPE_FP8_E4M3 ? 1 : 2;
    assert_int_equal(talon_moe_gemm(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.load_calls[TALON__IMG_moe_gemm], 1);
    assert_int_equal(fake.launches, 1);
    assert_int_equal(fake.last.fn, fake_handle_for(row->symbol));
    assert_int_equal(fake.last.grid[0], row->grid);
    assert_int_equal(fake.last.block[0], 384);
    assert_int_equal(fake.last.dependent, 1); /* a programmatic dependent (talon.h) */
    assert_int_equal(fake.last.smem, talon__kernels[kernel_index(row->symbol)].smem);
    assert_int_equal(fake.last.param_size, sizeof(talon__moe_gemm_params));
    p = (const talon__moe_gemm_params *)fake.last.params;
    assert_int_equal(p->a_ptr, a.a);
    assert_int_equal(p->d, a.d);
    assert_int_equal(p->sorted_token_ids, a.sorted_token_ids);
    assert_int_equal(p->expert_ids, a.expert_ids);
    assert_int_equal(p->num_post, a.num_tokens_post_padded);
    assert_int_equal(p->topk_weights, a.topk_weights);
    assert_int_equal(p->lda, a.k);
    assert_int_equal(p->ldd, a.n);
    assert_int_equal(p->n, a.n);
    assert_int_equal(p->k, a.k);
    assert_int_equal(p->experts, a.experts);
    assert_int_equal(p->topk, a.topk);
    assert_int_equal(p->pairs, a.tokens * a.topk);
    assert_int_equal(p->blocks, a.expert_ids_capacity);
    assert_int_equal(p->tiles_n, row->tiles_n);
    assert_int_equal(p->group, 16);
    assert_int_equal(p->a_rows, (int)a.a_rows);
    assert_int_equal(p->d_rows, (int)a.d_rows);
    assert_int_equal(p->act, (int)a.act);
    assert_int_equal(p->bias, a.bias);
    assert_true(p->act_alpha == a.act_alpha && p->act_limit == a.act_limit);
    assert_int_equal(p->skip_padding, a.tokens <= 128 && !swap);
    assert_int_equal(p->a_scale, a.a_scale);
    assert_int_equal(p->b_scale, a.b_scale);
    assert_int_equal(p->a_scale_step, a.scale == TALON_GEMM_SCALE_ROW);
    assert_int_equal(p->b_scale_step, a.scale == TALON_GEMM_SCALE_ROW);
    if (es == 1) {
        const int64_t kb = (a.k + 127) / 128, b_rows = (a.gated ? 2 : 1) * a.n;
        const int64_t a_rows = a.a_rows == TALON_MOE_ROWS_SORTED ? a.sorted_capacity
                               : a.a_rows == TALON_MOE_ROWS_TOKEN ? a.tokens : a.tokens * a.topk;
        assert_int_equal(p->b_scale_expert, a.scale == TALON_GEMM_SCALE_BLOCK ? (b_rows + 127) / 128 * kb
                                            : a.scale == TALON_GEMM_SCALE_ROW ? b_rows : 1);
        assert_int_equal(p->a_scale_ld, (a_rows + 3) / 4 * 4);
        assert_int_equal(p->b_scale_ld, kb);
        assert_int_equal(p->scale_rows, a_rows);
    } else {
        assert_int_equal(p->b_scale_expert, 0);
    }
    /* maps in order: a (SORTED, 128-row kernel), d (SORTED), b's gate (or only) view, b's up
       view (gated) */
    maps = (a.a_rows == TALON_MOE_ROWS_SORTED && !swap) + (a.d_rows == TALON_MOE_ROWS_SORTED) + 1 +
           a.gated;
    assert_int_equal(fake.encodes, maps);
    i = 0;
    if (a.a_rows == TALON_MOE_ROWS_SORTED && !swap) {
        assert_ptr_equal(fake.enc_log[i].addr, (void *)(uintptr_t)a.a);
        assert_int_equal(fake.enc_log[i].dims[1], a.sorted_capacity);
        assert_int_equal(fake.enc_log[i].box[1], 128);
        i++;
    }
    if (a.d_rows == TALON_MOE_ROWS_SORTED) {
        assert_ptr_equal(fake.enc_log[i].addr, (void *)(uintptr_t)a.d);
        assert_int_equal(fake.enc_log[i].dims[0], a.n);
        assert_int_equal(fake.enc_log[i].dims[1], a.sorted_capacity);
        assert_int_equal(fake.enc_log[i].box[0], 64);
        assert_int_equal(fake.enc_log[i].box[1], swap ? swap : 64);
        i++;
    }
    for (; i < maps; i++) {
        const int up = a.gated && i == maps - 1;
        assert_ptr_equal(fake.enc_log[i].addr, (void *)(uintptr_t)(a.b + (up ? a.n * a.k * es : 0)));
        assert_int_equal(fake.enc_log[i].rank, 3);
        assert_int_equal(fake.enc_log[i].dims[0], a.k);
        assert_int_equal(fake.enc_log[i].dims[1], a.n);
        assert_int_equal(fake.enc_log[i].dims[2], a.experts);
        assert_int_equal(fake.enc_log[i].strides[0], a.k * es);
        assert_int_equal(fake.enc_log[i].strides[1], (a.gated ? 2 : 1) * a.n * a.k * es);
        assert_int_equal(fake.enc_log[i].box[0], 128 / es);
        assert_int_equal(fake.enc_log[i].box[1], swap ? 128 : bn / 2);
        assert_int_equal(fake.enc_log[i].box[2], 1);
        assert_int_equal(fake.enc_log[i].swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
        assert_int_equal(fake.enc_log[i].type, a.dtype == TALON_DTYPE_F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                               : es == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                                         : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
    }
    memcpy(&map_base, &p->b_hi, sizeof map_base);
    assert_int_equal(map_base, a.b + (a.gated ? (CUdeviceptr)(a.n * a.k * es) : 0));
}

/* Strided views reach the params and the maps. */
static void test_strides(void **state) {
    talon_moe_gemm_args a;
    const talon__moe_gemm_params *p;
    (void)state;
    valid_args(&a);
    a.a_rows = TALON_MOE_ROWS_SORTED; a.d_rows = TALON_MOE_ROWS_PAIR;
    a.lda = 2056; a.ldb = 2064; a.ldd = 776;
    assert_int_equal(talon_moe_gemm(g_ctx, STREAM, &a), TALON_SUCCESS);
    p = (const talon__moe_gemm_params *)fake.last.params;
    assert_int_equal(p->lda, 2056);
    assert_int_equal(p->ldd, 776);
    assert_int_equal(fake.enc_log[0].strides[0], 2056 * 2); /* a */
    assert_int_equal(fake.enc_log[1].strides[0], 2064 * 2); /* b */
    assert_int_equal(fake.enc_log[1].strides[1], 2 * 768 * 2064 * 2);
}

/* ================================================================ talon_grouped_gemm */
/* Qwen3-30B-A3B's gate/up projection in the contiguous layout: 128 groups, 49152 rows (each
   group's padded to 128), w13 [128, 2 x 768, 2048]. */
static void grouped_valid_args(talon_grouped_gemm_args *a) {
    memset(a, 0, sizeof *a);
    a->d = P_D; a->a = P_A; a->b = P_B; a->tile_groups = P_EXPERTS; a->rows_used = P_POST;
    a->groups = 128; a->rows = 49152; a->n = 768; a->k = 2048;
    a->layout = TALON_GROUPED_CONTIGUOUS; a->act = TALON_GEMM_ACT_SILU; a->gated = 1;
}

/* The same weights in the masked layout: 128 groups of up to 256 rows. */
static void grouped_masked_args(talon_grouped_gemm_args *a) {
    grouped_valid_args(a);
    a->layout = TALON_GROUPED_MASKED; a->tile_groups = 0; a->rows_used = 0; a->group_rows = P_W;
    a->rows = 256;
}
/* The same shapes in fp8 e4m3 with block scales. */
static void grouped_fp8_args(talon_grouped_gemm_args *a) {
    grouped_valid_args(a);
    a->dtype = TALON_DTYPE_FP8_E4M3; a->scale = TALON_GEMM_SCALE_BLOCK;
    a->a_scale = P_AS; a->b_scale = P_BS;
}
static void grouped_args(int op, talon_grouped_gemm_args *a) {
    if (op == OP_GROUPED_MASKED) grouped_masked_args(a);
    else if (op == OP_GROUPED_FP8) grouped_fp8_args(a);
    else grouped_valid_args(a);
}

#define G(f, k, v) SET(talon_grouped_gemm_args, f, k, v)
#define GBAD(NAME, SETS, FIELD, VALUE)                                                         \
    {.name = "grouped_gemm: " NAME, .op = OP_GROUPED_GEMM, .kind = BAD_FIELDS, .set = SETS,    \
     .field = FIELD, .value = VALUE}
#define FBAD(NAME, SETS, FIELD, VALUE)                                                         \
    {.name = "grouped_gemm: fp8 " NAME, .op = OP_GROUPED_FP8, .kind = BAD_FIELDS, .set = SETS, \
     .field = FIELD, .value = VALUE}
#define MBAD(NAME, SETS, FIELD, VALUE)                                                         \
    {.name = "grouped_gemm: masked " NAME, .op = OP_GROUPED_MASKED, .kind = BAD_FIELDS,        \
     .set = SETS, .field = FIELD, .value = VALUE}

static const bad_row grouped_bad_rows[] = {
    {.name = "grouped_gemm: ctx NULL", .op = OP_GROUPED_GEMM, .kind = BAD_CTX, .field = "ctx", .value = "NULL"},
    {.name = "grouped_gemm: args NULL", .op = OP_GROUPED_GEMM, .kind = BAD_ARGS, .field = "args", .value = "NULL"},
    GBAD("dtype F32", ONE(G(dtype, ENUM, TALON_DTYPE_F32)), "args->dtype", "2"),
    GBAD("dtype fp8 with scale NONE", ONE(G(dtype, ENUM, TALON_DTYPE_FP8_E4M3)), "args->scale",
         "0"),
    GBAD("scale BLOCK with bf16", ONE(G(scale, ENUM, TALON_GEMM_SCALE_BLOCK)), "args->scale", "3"),
    GBAD("a_scale with bf16", ONE(G(a_scale, PTR, P_AS)), "args->a_scale", "0x44000000"),
    GBAD("b_scale with bf16", ONE(G(b_scale, PTR, P_BS)), "args->b_scale", "0x45000000"),
    FBAD("scale 4", ONE(G(scale, ENUM, 4)), "args->scale", "4"),
    FBAD("a_scale NULL", ONE(G(a_scale, PTR, 0)), "args->a_scale", "NULL"),
    FBAD("b_scale 2-byte aligned", ONE(G(b_scale, PTR, P_BS + 2)), "args->b_scale", "0x45000002"),
    FBAD("gated n 96 (not a multiple of 64)", ONE(G(n, I64, 96)), "args->n", "96"),
    FBAD("lda 2056 (not a multiple of 16)", ONE(G(lda, I64, 2056)), "args->lda", "2056"),
    FBAD("k 2056 with lda 0", ONE(G(k, I64, 2056)), "args->lda", "2056"),
    /* a_scale: 16 k-blocks x 49152 rows x 4 bytes = 0x300000; d from P_D spans 0x4800000 */
    FBAD("a_scale inside d", ONE(G(a_scale, PTR, P_D + 0x4800000 - 4)), "args->a_scale", "0x247ffffc"),
    FBAD("a_scale's end inside d", ONE(G(a_scale, PTR, P_D - 0x300000 + 4)), "args->a_scale",
         "0x1fd00004"),
    /* b_scale: 128 groups x 12 blocks x 16 k-blocks x 4 bytes = 0x18000 */
    FBAD("b_scale's end inside d", ONE(G(b_scale, PTR, P_D - 0x18000 + 4)), "args->b_scale",
         "0x1ffe8004"),
    /* ROW: a_scale one float per row (49152 x 4 bytes = 0x30000), b_scale one per row of each
       group's b (128 x 1536 x 4 = 0xc0000), 8-byte aligned; TENSOR: one, one per group */
    FBAD("ROW a_scale's end inside d",
         ONE(G(scale, ENUM, TALON_GEMM_SCALE_ROW), G(a_scale, PTR, P_D - 0x30000 + 4)),
         "args->a_scale", "0x1ffd0004"),
    FBAD("ROW b_scale's end inside d",
         ONE(G(scale, ENUM, TALON_GEMM_SCALE_ROW), G(b_scale, PTR, P_D - 0xc0000 + 4)),
         "args->b_scale", "0x1ff40004"),
    FBAD("ROW b_scale 4-byte aligned",
         ONE(G(scale, ENUM, TALON_GEMM_SCALE_ROW), G(b_scale, PTR, P_BS + 4)), "args->b_scale",
         "0x45000004"),
    FBAD("TENSOR a_scale inside d", ONE(G(scale, ENUM, TALON_GEMM_SCALE_TENSOR), G(a_scale, PTR, P_D)),
         "args->a_scale", "0x20000000"),
    FBAD("TENSOR b_scale's end inside d",
         ONE(G(scale, ENUM, TALON_GEMM_SCALE_TENSOR), G(b_scale, PTR, P_D - 0x200 + 4)),
         "args->b_scale", "0x1ffffe04"),
    GBAD("groups 0", ONE(G(groups, I64, 0)), "args->groups", "0"),
    GBAD("groups 65537", ONE(G(groups, I64, 65537)), "args->groups", "65537"),
    GBAD("layout 2", ONE(G(layout, ENUM, 2)), "args->layout", "2"),
    GBAD("layout -1", ONE(G(layout, ENUM, -1)), "args->layout", "-1"),
    GBAD("tile_groups NULL", ONE(G(tile_groups, PTR, 0)), "args->tile_groups", "NULL"),
    GBAD("tile_groups 2-byte aligned", ONE(G(tile_groups, PTR, P_EXPERTS + 2)), "args->tile_groups",
         "0x41000002"),
    GBAD("rows_used 2-byte aligned", ONE(G(rows_used, PTR, P_POST + 2)), "args->rows_used",
         "0x42000002"),
    GBAD("group_rows given with CONTIGUOUS", ONE(G(group_rows, PTR, P_W)), "args->group_rows",
         "0x43000000"),
    MBAD("group_rows NULL", ONE(G(group_rows, PTR, 0)), "args->group_rows", "NULL"),
    MBAD("group_rows 2-byte aligned", ONE(G(group_rows, PTR, P_W + 2)), "args->group_rows",
         "0x43000002"),
    MBAD("tile_groups given", ONE(G(tile_groups, PTR, P_EXPERTS)), "args->tile_groups",
         "0x41000000"),
    MBAD("rows_used given", ONE(G(rows_used, PTR, P_POST)), "args->rows_used", "0x42000000"),
    GBAD("rows 0", ONE(G(rows, I64, 0)), "args->rows", "0"),
    GBAD("rows 200 (not a multiple of 128)", ONE(G(rows, I64, 200)), "args->rows", "200"),
    GBAD("rows 2^31", ONE(G(rows, I64, 2147483648)), "args->rows", "2147483648"),
    MBAD("rows 0", ONE(G(rows, I64, 0)), "args->rows", "0"),
    MBAD("rows 2^20 + 1", ONE(G(rows, I64, 1048577)), "args->rows", "1048577"),
    MBAD("groups x rows 2^31", ONE(G(groups, I64, 65536), G(rows, I64, 32768)), "args->rows",
         "32768"),
    GBAD("n 0", ONE(G(n, I64, 0)), "args->n", "0"),
    GBAD("n 772 (not a multiple of 8)", ONE(G(n, I64, 772)), "args->n", "772"),
    GBAD("k 2^20 + 8", ONE(G(k, I64, 1048584)), "args->k", "1048584"),
    GBAD("gated 2", ONE(G(gated, INT, 2)), "args->gated", "2"),
    GBAD("act 6", ONE(G(act, ENUM, 6)), "args->act", "6"),
    GBAD("act CLAMPED_SWIGLU not gated", ONE(G(act, ENUM, TALON_GEMM_ACT_CLAMPED_SWIGLU),
         G(gated, INT, 0), G(act_alpha, F32, 1.702), G(act_limit, F32, 7)), "args->gated", "0"),
    GBAD("act CLAMPED_SWIGLU limit -inf", ONE(G(act, ENUM, TALON_GEMM_ACT_CLAMPED_SWIGLU),
         G(act_alpha, F32, 1.702), G(act_limit, F32, -INFINITY)), "args->act_limit", "-inf"),
    GBAD("act_limit with SILU", ONE(G(act_limit, F32, 7)), "args->act_limit", "7"),
    GBAD("bias 2-byte aligned", ONE(G(bias, PTR, P_BIAS + 2)), "args->bias", "0x46000002"),
    GBAD("lda 2040 (shorter than k)", ONE(G(lda, I64, 2040)), "args->lda", "2040"),
    GBAD("ldb 2049", ONE(G(ldb, I64, 2049)), "args->ldb", "2049"),
    GBAD("ldd 760 (shorter than n)", ONE(G(ldd, I64, 760)), "args->ldd", "760"),
    GBAD("d NULL", ONE(G(d, PTR, 0)), "args->d", "NULL"),
    GBAD("d 8-byte aligned", ONE(G(d, PTR, P_D + 8)), "args->d", "0x20000008"),
    GBAD("a NULL", ONE(G(a, PTR, 0)), "args->a", "NULL"),
    GBAD("b 2-byte aligned", ONE(G(b, PTR, P_B + 2)), "args->b", "0x100000002"),
    /* d spans 49152 rows x 768 x 2 bytes = 0x4800000 from P_D */
    GBAD("a overlaps d", ONE(G(a, PTR, P_D + 0x1000)), "args->a", "0x20001000"),
    GBAD("b overlaps d's last row", ONE(G(b, PTR, P_D + 0x4800000 - 16)), "args->b", "0x247ffff0"),
    GBAD("tile_groups inside d", ONE(G(tile_groups, PTR, P_D + 64)), "args->tile_groups",
         "0x20000040"),
    GBAD("rows_used inside d", ONE(G(rows_used, PTR, P_D + 4)), "args->rows_used", "0x20000004"),
    GBAD("bias inside d", ONE(G(bias, PTR, P_D + 0x4800000 - 4)), "args->bias", "0x247ffffc"),
    /* MASKED: 128 groups x 256 rows x 768 x 2 bytes = 0x3000000 */
    MBAD("group_rows inside d", ONE(G(group_rows, PTR, P_D + 0x3000000 - 4)), "args->group_rows",
         "0x22fffffc"),
    GBAD("2^30 tiles and more (n 2^20, rows 2^31 - 128)", ONE(G(n, I64, 1048576), G(gated, INT, 0),
         G(rows, I64, 2147483520), G(d, PTR, 0x100000000000ull)), "args->n", "1048576"),
};

static void test_grouped_invalid_argument(void **state) {
    const bad_row *row = (const bad_row *)*state;
    talon_grouped_gemm_args a;
    grouped_args(row->op, &a);
    apply_sets(&a, row->set, MAX_SETS);
    assert_rejected(talon_grouped_gemm(row->kind == BAD_CTX ? NULL : g_ctx, STREAM,
                                       row->kind == BAD_ARGS ? NULL : &a),
                    op_names[row->op], row->field, row->value);
    assert_int_equal(fake.encodes, 0);
}

/* The smallest and the largest accepted shapes of both layouts launch. */
static void test_grouped_accepts_edges(void **state) {
    talon_grouped_gemm_args a;
    (void)state;
    grouped_valid_args(&a);
    a.groups = 1; a.rows = 128; a.n = 8; a.k = 8; a.rows_used = 0;
    assert_int_equal(talon_grouped_gemm(g_ctx, STREAM, &a), TALON_SUCCESS);
    grouped_masked_args(&a);
    a.groups = 1; a.rows = 1; a.n = 8; a.k = 8; a.gated = 0;
    assert_int_equal(talon_grouped_gemm(g_ctx, STREAM, &a), TALON_SUCCESS);
    a.groups = 2047; a.rows = 1 << 20; a.d = 0x100000000000ull; a.b = 0x4000000000ull;
    assert_int_equal(talon_grouped_gemm(g_ctx, STREAM, &a), TALON_SUCCESS);
    a.groups = 65536; a.rows = 32767; a.n = 64;
    assert_int_equal(talon_grouped_gemm(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.launches, 4);
}

/* The plans: CONTIGUOUS walks rows / 128 blocks, MASKED ceil(rows / 128) per group. */
static void test_grouped_plan(void **state) {
    talon__moe_gemm_plan pl;
    (void)state;
    talon__grouped_gemm_plan_make(TALON_GROUPED_CONTIGUOUS, 128, 49152, 768, 1, 0, 132, &pl);
    assert_int_equal(pl.blocks, 384);
    assert_int_equal(pl.bn, 256);
    assert_int_equal(pl.tiles_n, 6);
    assert_int_equal(pl.grid, 132);
    /* expert-parallel decode: 32 local experts x 100 rows: 32 blocks; n 7168 in 56 tiles of
       128 fill more SMs than 28 of 256 */
    talon__grouped_gemm_plan_make(TALON_GROUPED_MASKED, 32, 100, 7168, 0, 0, 132, &pl);
    assert_int_equal(pl.blocks, 32);
    assert_int_equal(pl.bn, 128);
    assert_int_equal(pl.tiles_n, 56);
    assert_int_equal(pl.skip_padding, 0); /* no padding slots: the counts say what is live */
    talon__grouped_gemm_plan_make(TALON_GROUPED_MASKED, 4, 257, 64, 1, 0, 132, &pl);
    assert_int_equal(pl.blocks, 12);
    assert_int_equal(pl.tiles_n, 1);
    assert_int_equal(pl.grid, 12);
    /* the SM count bounds the grid; whole clusters of 2, at least one */
    talon__grouped_gemm_plan_make(TALON_GROUPED_CONTIGUOUS, 128, 49152, 768, 1, 0, 78, &pl);
    assert_int_equal(pl.grid, 78);
    talon__grouped_gemm_plan_make(TALON_GROUPED_CONTIGUOUS, 128, 49152, 768, 1, 0, 77, &pl);
    assert_int_equal(pl.grid, 76);
    talon__grouped_gemm_plan_make(TALON_GROUPED_MASKED, 3, 100, 64, 1, 0, 132, &pl);
    assert_int_equal(pl.grid, 2); /* 3 tiles */
    talon__grouped_gemm_plan_make(TALON_GROUPED_MASKED, 1, 1, 64, 1, 0, 132, &pl);
    assert_int_equal(pl.grid, 2); /* 1 tile: one CTA of the pair idles */
    /* fp8 gated: 256 where n is a multiple of 128, else 128 (the up half's scale blocks) */
    talon__grouped_gemm_plan_make(TALON_GROUPED_CONTIGUOUS, 128, 49152, 768, 1, 1, 132, &pl);
    assert_int_equal(pl.bn, 256);
    talon__grouped_gemm_plan_make(TALON_GROUPED_CONTIGUOUS, 128, 49152, 1088, 1, 1, 132, &pl);
    assert_int_equal(pl.bn, 128);
    talon__grouped_gemm_plan_make(TALON_GROUPED_CONTIGUOUS, 128, 49152, 1088, 1, 0, 132, &pl);
    assert_int_equal(pl.bn, 256);
}

typedef struct grouped_launch_row {
    const char *name;
    int op; /* OP_GROUPED_GEMM or OP_GROUPED_MASKED: the valid args edited */
    field_set set[MAX_SETS];
    const char *symbol;
    int grid, blocks, tiles_n;
} grouped_launch_row;
#define GLAUNCH(NAME, OP, SETS, SYM, GRID, BLOCKS, TN)                                         \
    {"grouped_gemm launches " NAME, OP, SETS, SYM, GRID, BLOCKS, TN}

static const grouped_launch_row grouped_launch_rows[] = {
    GLAUNCH("bf16 contiguous gate/up, gated 256", OP_GROUPED_GEMM, NONE,
            "talon_moe_gemm_bf16_gated_256", 132, 384, 6),
    GLAUNCH("f16 contiguous without rows_used", OP_GROUPED_GEMM,
            ONE(G(dtype, ENUM, TALON_DTYPE_F16), G(rows_used, PTR, 0)),
            "talon_moe_gemm_f16_gated_256", 132, 384, 6),
    GLAUNCH("bf16 masked down, 32 groups x 100 rows, n 7168: 128", OP_GROUPED_MASKED,
            ONE(G(groups, I64, 32), G(rows, I64, 100), G(n, I64, 7168), G(gated, INT, 0),
                G(act, ENUM, TALON_GEMM_ACT_NONE)),
            "talon_moe_gemm_bf16_128", 132, 32, 56),
    GLAUNCH("f16 masked gated, 4 groups x 257 rows", OP_GROUPED_MASKED,
            ONE(G(dtype, ENUM, TALON_DTYPE_F16), G(groups, I64, 4), G(rows, I64, 257), G(n, I64, 64)),
            "talon_moe_gemm_f16_gated_128", 12, 12, 1),
    GLAUNCH("fp8 contiguous gated n 768: 256", OP_GROUPED_FP8, NONE,
            "talon_moe_gemm_e4m3_block_gated_256", 132, 384, 6),
    GLAUNCH("fp8 contiguous gated n 704: 128", OP_GROUPED_FP8, ONE(G(n, I64, 704)),
            "talon_moe_gemm_e4m3_block_gated_128", 132, 384, 11),
    GLAUNCH("fp8 masked down, 32 groups x 100 rows", OP_GROUPED_FP8,
            ONE(G(layout, ENUM, TALON_GROUPED_MASKED), G(tile_groups, PTR, 0), G(rows_used, PTR, 0),
                G(group_rows, PTR, P_W), G(rows, I64, 100), G(gated, INT, 0)),
            "talon_moe_gemm_e4m3_block_128", 132, 128, 6),
    GLAUNCH("fp8 row contiguous gated n 768: 256", OP_GROUPED_FP8,
            ONE(G(scale, ENUM, TALON_GEMM_SCALE_ROW)), "talon_moe_gemm_e4m3_row_gated_256", 132,
            384, 6),
    GLAUNCH("fp8 row contiguous gated n 96 (block scales need a multiple of 64)", OP_GROUPED_FP8,
            ONE(G(scale, ENUM, TALON_GEMM_SCALE_ROW), G(n, I64, 96)),
            "talon_moe_gemm_e4m3_row_gated_256", 132, 384, 1),
    GLAUNCH("fp8 tensor masked down, 32 groups x 100 rows", OP_GROUPED_FP8,
            ONE(G(scale, ENUM, TALON_GEMM_SCALE_TENSOR), G(layout, ENUM, TALON_GROUPED_MASKED),
                G(tile_groups, PTR, 0), G(rows_used, PTR, 0), G(group_rows, PTR, P_W),
                G(rows, I64, 100), G(gated, INT, 0)),
            "talon_moe_gemm_e4m3_row_128", 132, 128, 6),
    GLAUNCH("bf16 contiguous gated with bias and CLAMPED_SWIGLU", OP_GROUPED_GEMM,
            ONE(G(bias, PTR, P_BIAS), G(act, ENUM, TALON_GEMM_ACT_CLAMPED_SWIGLU),
                G(act_alpha, F32, 1.702), G(act_limit, F32, 7)),
            "talon_moe_gemm_bf16_gated_256", 132, 384, 6),
};

static void test_grouped_launch(void **state) {
    const grouped_launch_row *row = (const grouped_launch_row *)*state;
    const talon__moe_gemm_params *p;
    talon_grouped_gemm_args a;
    int64_t rows;
    int masked;
    grouped_args(row->op, &a);
    apply_sets(&a, row->set, MAX_SETS);
    masked = a.layout == TALON_GROUPED_MASKED;
    rows = masked ? a.groups * a.rows : a.rows;
    assert_int_equal(talon_grouped_gemm(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.launches, 1);
    assert_int_equal(fake.last.fn, fake_handle_for(row->symbol));
    assert_int_equal(fake.last.grid[0], row->grid);
    assert_int_equal(fake.last.block[0], 384);
    assert_int_equal(fake.last.dependent, 1);
    assert_int_equal(fake.last.param_size, sizeof(talon__moe_gemm_params));
    p = (const talon__moe_gemm_params *)fake.last.params;
    assert_int_equal(p->layout, masked ? TALON__MOE_LAYOUT_MASKED : TALON__MOE_LAYOUT_CONTIGUOUS);
    assert_int_equal(p->skip_padding, 0);
    assert_int_equal(p->group_size, masked ? a.rows : 0);
    assert_int_equal(p->expert_ids, a.tile_groups);
    assert_int_equal(p->num_post, a.rows_used);
    assert_int_equal(p->group_rows, a.group_rows);
    assert_int_equal(p->sorted_token_ids, 0);
    assert_int_equal(p->topk_weights, 0);
    assert_int_equal(p->a_rows, TALON__MOE_ROWS_SORTED);
    assert_int_equal(p->d_rows, TALON__MOE_ROWS_SORTED);
    assert_int_equal(p->experts, a.groups);
    assert_int_equal(p->blocks, row->blocks);
    assert_int_equal(p->tiles_n, row->tiles_n);
    assert_int_equal(p->n, a.n);
    assert_int_equal(p->k, a.k);
    assert_int_equal(p->act, (int)a.act);
    assert_int_equal(p->bias, a.bias);
    assert_true(p->act_alpha == a.act_alpha && p->act_limit == a.act_limit);
    if (a.dtype == TALON_DTYPE_FP8_E4M3) {
        const int64_t kb = (a.k + 127) / 128, b_rows = (a.gated ? 2 : 1) * a.n;
        const int row = a.scale == TALON_GEMM_SCALE_ROW;
        assert_int_equal(p->a_scale, a.a_scale);
        assert_int_equal(p->b_scale, a.b_scale);
        assert_int_equal(p->a_scale_ld, (rows + 3) / 4 * 4);
        assert_int_equal(p->b_scale_ld, kb);
        assert_int_equal(p->b_scale_expert, a.scale == TALON_GEMM_SCALE_BLOCK ? (b_rows + 127) / 128 * kb
                                            : row ? b_rows : 1);
        assert_int_equal(p->a_scale_step, row);
        assert_int_equal(p->b_scale_step, row);
        assert_int_equal(p->scale_rows, rows);
        assert_int_equal(fake.enc_log[0].type, CU_TENSOR_MAP_DATA_TYPE_UINT8);
        assert_int_equal(fake.enc_log[0].box[0], 128);
        assert_int_equal(fake.enc_log[1].type, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
        assert_int_equal(fake.enc_log[2].type, CU_TENSOR_MAP_DATA_TYPE_UINT8);
        assert_int_equal(fake.enc_log[2].strides[1], (a.gated ? 2 : 1) * a.n * a.k);
        if (a.gated) assert_int_equal(fake.enc_log[3].addr, (void *)(uintptr_t)(a.b + a.n * a.k));
    } else {
        assert_int_equal(p->a_scale, 0);
        assert_int_equal(p->b_scale, 0);
        assert_int_equal(p->a_scale_step, 0);
        assert_int_equal(p->b_scale_step, 0);
        assert_int_equal(fake.enc_log[2].strides[1], (a.gated ? 2 : 1) * a.n * a.k * 2);
    }
    /* maps: a and d over every row (MASKED: the groups' blocks back to back), then b's views */
    assert_int_equal(fake.encodes, 3 + a.gated);
    assert_ptr_equal(fake.enc_log[0].addr, (void *)(uintptr_t)a.a);
    assert_int_equal(fake.enc_log[0].dims[1], rows);
    assert_int_equal(fake.enc_log[0].box[1], 128);
    assert_ptr_equal(fake.enc_log[1].addr, (void *)(uintptr_t)a.d);
    assert_int_equal(fake.enc_log[1].dims[0], a.n);
    assert_int_equal(fake.enc_log[1].dims[1], rows);
    assert_int_equal(fake.enc_log[1].box[1], 64);
    assert_int_equal(fake.enc_log[2].rank, 3);
    assert_int_equal(fake.enc_log[2].dims[1], a.n);
    assert_int_equal(fake.enc_log[2].dims[2], a.groups);
}

/* ================================================================ main */
int main(void) {
    size_t i;
    for (i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; i++)
        test_add(bad_rows[i].name, test_invalid_argument, &bad_rows[i]);
    test_add("moe_gemm: accepts the edges", test_accepts_edges, NULL);
    test_add("moe_gemm: a failed tensor map encode", test_encode_failure, NULL);
    test_add("moe_gemm: plan", test_plan, NULL);
    for (i = 0; i < sizeof launch_rows / sizeof launch_rows[0]; i++)
        test_add(launch_rows[i].name, test_launch, &launch_rows[i]);
    test_add("moe_gemm: strided views", test_strides, NULL);
    for (i = 0; i < sizeof grouped_bad_rows / sizeof grouped_bad_rows[0]; i++)
        test_add(grouped_bad_rows[i].name, test_grouped_invalid_argument, &grouped_bad_rows[i]);
    test_add("grouped_gemm: accepts the edges", test_grouped_accepts_edges, NULL);
    test_add("grouped_gemm: plan", test_grouped_plan, NULL);
    for (i = 0; i < sizeof grouped_launch_rows / sizeof grouped_launch_rows[0]; i++)
        test_add(grouped_launch_rows[i].name, test_grouped_launch, &grouped_launch_rows[i]);
    return test_run("test_moe_gemm");
}
