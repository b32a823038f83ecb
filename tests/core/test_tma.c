/* TMA tensor maps (include/talon/impl/tma.h) on the fake driver: what is handed to
   cuTensorMapEncodeTiled for valid shapes, one test per rule that must be refused before the
   driver is asked, and a driver failure reported with its CUresult. */
#include "fake_driver.h"

enum { P_BASE = 0x7f0000100000ull };

/* A bf16 [300, 1000] matrix, rows 2048 bytes apart, boxes of 64 x 64 with the 128B swizzle:
   what a GEMM's A operand asks for. */
static talon__tensor_map_shape valid_shape(void) {
    talon__tensor_map_shape t;
    memset(&t, 0, sizeof t);
    t.type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    t.rank = 2;
    t.dims[0] = 1000; t.dims[1] = 300;
    t.strides[0] = 2048;
    t.box[0] = 64; t.box[1] = 64;
    t.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
    return t;
}

static void test_encodes(void **state) {
    talon__tensor_map_shape t = valid_shape();
    CUtensorMap map;
    CUdeviceptr seen;
    (void)state;
    assert_int_equal(talon__tensor_map(g_ctx, "op", "a", &map, P_BASE, &t), TALON_SUCCESS);
    assert_int_equal(fake.encodes, 1);
    assert_int_equal(fake.enc.type, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
    assert_int_equal(fake.enc.rank, 2);
    assert_true(fake.enc.addr == (void *)(uintptr_t)P_BASE);
    assert_int_equal(fake.enc.dims[0], 1000);
    assert_int_equal(fake.enc.dims[1], 300);
    assert_int_equal(fake.enc.strides[0], 2048);
    assert_int_equal(fake.enc.box[0], 64);
    assert_int_equal(fake.enc.box[1], 64);
    assert_int_equal(fake.enc.elem_strides[0], 1);
    assert_int_equal(fake.enc.elem_strides[1], 1);
    assert_int_equal(fake.enc.interleave, CU_TENSOR_MAP_INTERLEAVE_NONE);
    assert_int_equal(fake.enc.swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
    assert_int_equal(fake.enc.l2, CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
    assert_int_equal(fake.enc.oob, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    memcpy(&seen, &map, sizeof seen);
    assert_true(seen == P_BASE); /* the fake's mark: the map written is the one encoded */
}

static void test_encodes_edges(void **state) {
    talon__tensor_map_shape t = valid_shape();
    CUtensorMap map;
    (void)state;
    /* rank 5, the largest dimension, the longest stride, a 256-row box, fp8 bytes unswizzled */
    t.type = CU_TENSOR_MAP_DATA_TYPE_UINT8;
    t.rank = 5;
    t.swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
    t.dims[0] = 1ull << 32; t.dims[1] = 1; t.dims[2] = 3; t.dims[3] = 5; t.dims[4] = 7;
    t.strides[0] = (1ull << 40) - 16; t.strides[1] = 16; t.strides[2] = 32; t.strides[3] = 48;
    t.box[0] = 256; t.box[1] = 1; t.box[2] = 256; t.box[3] = 2; t.box[4] = 3;
    assert_int_equal(talon__tensor_map(g_ctx, "op", "a", &map, P_BASE, &t), TALON_SUCCESS);
    assert_int_equal(fake.enc.rank, 5);
    assert_int_equal(fake.enc.dims[0], 1ull << 32);
    assert_int_equal(fake.enc.strides[3], 48);
    assert_int_equal(fake.enc.box[4], 3);
    /* 32-byte swizzle with a 32-byte box row (16 bf16) */
    t = valid_shape();
    t.swizzle = CU_TENSOR_MAP_SWIZZLE_32B;
    t.box[0] = 16;
    assert_int_equal(talon__tensor_map(g_ctx, "op", "a", &map, P_BASE, &t), TALON_SUCCESS);
    assert_int_equal(fake.encodes, 2);
}

/* One refused shape: INVALID_ARGUMENT naming the tensor and the value, the driver not asked. */
typedef struct bad_map {
    const char *name;
    void (*edit)(talon__tensor_map_shape *t, CUdeviceptr *base);
    const char *field, *value;
} bad_map;

static void e_base(talon__tensor_map_shape *t, CUdeviceptr *b) { (void)t; *b = P_BASE + 8; }
static void e_type(talon__tensor_map_shape *t, CUdeviceptr *b) { (void)b; t->type = CU_TENSOR_MAP_DATA_TYPE_FLOAT64; }
static void e_rank0(talon__tensor_map_shape *t, CUdeviceptr *b) { (void)b; t->rank = 0; }
static void e_rank6(talon__tensor_map_shape *t, CUdeviceptr *b) { (void)b; t->rank = 6; }
static void e_dim0(talon__tensor_map_shape *t, CUdeviceptr *b) { (void)b; t->dims[1] = 0; }
static void e_dim_big(talon__tensor_map_shape *t, CUdeviceptr *b) { (void)b; t->dims[0] = (1ull << 32) + 1; }
static void e_box0(talon__tensor_map_shape *t, CUdeviceptr *b) { (void)b; t->box[1] = 0; }
static void e_box257(talon__tensor_map_shape *t, CUdeviceptr *b) { (void)b; t->box[1] = 257; }
static void e_stride8(talon__tensor_map_shape *t, CUdeviceptr *b) { (void)b; t->strides[0] = 2008; }
static void e_stride_big(talon__tensor_map_shape *t, CUdeviceptr *b) { (void)b; t->strides[0] = 1ull << 40; }
static void e_row12(talon__tensor_map_shape *t, CUdeviceptr *b) { (void)b; t->box[0] = 6; t->swizzle = CU_TENSOR_MAP_SWIZZLE_NONE; }
static void e_span(talon__tensor_map_shape *t, CUdeviceptr *b) { (void)b; t->box[0] = 128; }
static void e_span64(talon__tensor_map_shape *t, CUdeviceptr *b) { (void)b; t->box[0] = 64; t->swizzle = CU_TENSOR_MAP_SWIZZLE_64B; }

static const bad_map bad_maps[] = {
    {"tma rejects a base misaligned by 8", e_base, "args->a", "0x7f0000100008"},
    {"tma rejects an fp64 element", e_type, "args->a:", "type"},
    {"tma rejects rank 0", e_rank0, "args->a:", "0"},
    {"tma rejects rank 6", e_rank6, "args->a:", "6"},
    {"tma rejects a dimension 0", e_dim0, "args->a:", "0"},
    {"tma rejects a dimension 2^32 + 1", e_dim_big, "args->a:", "4294967297"},
    {"tma rejects a box dimension 0", e_box0, "args->a:", "0"},
    {"tma rejects a box dimension 257", e_box257, "args->a:", "257"},
    {"tma rejects a stride 2008 (not a multiple of 16)", e_stride8, "args->a:", "2008"},
    {"tma rejects a stride 2^40", e_stride_big, "args->a:", "1099511627776"},
    {"tma rejects a box row of 12 bytes", e_row12, "args->a:", "12"},
    {"tma rejects a box row of 256 bytes under the 128B swizzle", e_span, "args->a:", "256"},
    {"tma rejects a box row of 128 bytes under the 64B swizzle", e_span64, "args->a:", "128"},
};

static void test_rejects(void **state) {
    const bad_map *row = (const bad_map *)*state;
    talon__tensor_map_shape t = valid_shape();
    CUdeviceptr base = P_BASE;
    CUtensorMap map;
    talon_status s;
    row->edit(&t, &base);
    s = talon__tensor_map(g_ctx, "talon_op", "a", &map, base, &t);
    assert_int_equal(fake.encodes, 0);
    assert_rejected(s, "talon_op", row->field, row->value);
}

static void test_driver_failure(void **state) {
    talon__tensor_map_shape t = valid_shape();
    CUtensorMap map;
    (void)state;
    fake.encode_result = CUDA_ERROR_INVALID_VALUE;
    assert_int_equal(talon__tensor_map(g_ctx, "talon_op", "b", &map, P_BASE, &t), TALON_ERROR_DRIVER);
    assert_contains(talon_last_error(), "talon_op: cuTensorMapEncodeTiled(args->b)");
    assert_contains(talon_last_error(), "CUDA_ERROR_INVALID_VALUE");
}

int main(void) {
    size_t i;
    test_add("tma encodes a bf16 matrix with the 128B swizzle", test_encodes, NULL);
    test_add("tma encodes at the limits", test_encodes_edges, NULL);
    for (i = 0; i < sizeof bad_maps / sizeof bad_maps[0]; i++)
        test_add(bad_maps[i].name, test_rejects, &bad_maps[i]);
    test_add("tma reports a driver failure", test_driver_failure, NULL);
    return test_run("test_tma");
}
