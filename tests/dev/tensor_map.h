/* Host helpers that build TMA tensor maps (CUtensorMap) for the kernels in kernels/dev/.
 * Plain C99 (also valid C++17); needs only <cuda.h> for the types. The encoder is passed in,
 * resolved by the caller through cuGetProcAddress("cuTensorMapEncodeTiled", 12000, ...), so
 * nothing here links against libcuda.
 *
 * Rules the driver enforces (cuTensorMapEncodeTiled returns CUDA_ERROR_INVALID_VALUE otherwise),
 * checked here first so the failing rule is the one reported:
 *  - base address 16-byte aligned (32 for interleaved layouts, not used here);
 *  - every stride except the innermost (implicit element size) a multiple of 16 bytes and
 *    < 2^40; dimensions 1..2^32;
 *  - box dimensions 1..256 each; box inner dimension * element size a multiple of 16 bytes;
 *  - with a swizzle, box inner dimension * element size <= the swizzle span (32, 64 or 128 B),
 *    and shared-memory destinations aligned to the swizzle atom (8 rows x span; 1024 B for 128B).
 * Out-of-bounds box elements read as zero (CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) and are not
 * written by stores. Element strides are 1 (dense boxes). L2 promotion 128B.
 * Not checkable here, seen on H200 (see kernels/dev/tma.cuh): the innermost box coordinate given
 * to the copy must be a multiple of 16 bytes, store coordinates must be >= 0 (loads may be
 * negative), and stores clip the innermost dimension only to
 * 16-byte granularity, so a map that is stored through should have cols * element size a
 * multiple of 16 (or own the row padding up to the next 16 bytes).
 */
#ifndef TALON_TESTS_DEV_TENSOR_MAP_H
#define TALON_TESTS_DEV_TENSOR_MAP_H
#include <stdint.h>
#include <cuda.h>

typedef CUresult (*dev_encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                        const cuuint64_t *, const cuuint64_t *,
                                        const cuuint32_t *, const cuuint32_t *,
                                        CUtensorMapInterleave, CUtensorMapSwizzle,
                                        CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static inline uint32_t dev_tensor_map_elem_bytes(CUtensorMapDataType type) {
    switch (type) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

static inline uint32_t dev_tensor_map_swizzle_span(CUtensorMapSwizzle swizzle) {
    switch (swizzle) {
    case CU_TENSOR_MAP_SWIZZLE_32B: return 32;
    case CU_TENSOR_MAP_SWIZZLE_64B: return 64;
    case CU_TENSOR_MAP_SWIZZLE_128B: return 128;
    default: return 0;
    }
}

/* Rank-N tiled map. dims[0] innermost (elements), strides_bytes[i] = stride of dims[i + 1]. */
static inline CUresult dev_tensor_map_nd(dev_encode_tiled_fn encode, CUtensorMap *map,
                                  CUtensorMapDataType type, uint32_t rank, const void *base,
                                  const uint64_t *dims, const uint64_t *strides_bytes,
                                  const uint32_t *box, CUtensorMapSwizzle swizzle) {
    cuuint64_t d[5], s[4];
    cuuint32_t b[5], e[5];
    uint32_t i, elem = dev_tensor_map_elem_bytes(type), span = dev_tensor_map_swizzle_span(swizzle);
    if (!encode || !map || rank < 1 || rank > 5 || elem == 0) return CUDA_ERROR_INVALID_VALUE;
    if (((uintptr_t)base & 15u) != 0) return CUDA_ERROR_INVALID_VALUE;
    for (i = 0; i < rank; i++) {
        if (dims[i] < 1 || dims[i] > ((uint64_t)1 << 32) || box[i] < 1 || box[i] > 256)
            return CUDA_ERROR_INVALID_VALUE;
        d[i] = dims[i];
        b[i] = box[i];
        e[i] = 1;
    }
    for (i = 0; i + 1 < rank; i++) {
        if (strides_bytes[i] % 16 != 0 || strides_bytes[i] >= ((uint64_t)1 << 40))
            return CUDA_ERROR_INVALID_VALUE;
        s[i] = strides_bytes[i];
    }
    if ((box[0] * elem) % 16 != 0) return CUDA_ERROR_INVALID_VALUE;
    if (span && box[0] * elem > span) return CUDA_ERROR_INVALID_VALUE;
    return encode(map, type, rank, (void *)(uintptr_t)base, d, s, b, e,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

/* A row-major matrix of rows x cols elements, rows row_stride_bytes apart; boxes of
 * box_rows x box_cols. TMA coordinates are (column, row). */
static inline CUresult dev_tensor_map_2d(dev_encode_tiled_fn encode, CUtensorMap *map,
                                  CUtensorMapDataType type, const void *base, uint64_t rows,
                                  uint64_t cols, uint64_t row_stride_bytes, uint32_t box_rows,
                                  uint32_t box_cols, CUtensorMapSwizzle swizzle) {
    uint64_t dims[2];
    uint32_t box[2];
    dims[0] = cols;
    dims[1] = rows;
    box[0] = box_cols;
    box[1] = box_rows;
    return dev_tensor_map_nd(encode, map, type, 2, base, dims, &row_stride_bytes, box, swizzle);
}

/* A batch of `batch` such matrices, matrix_stride_bytes apart; coordinates (column, row, batch). */
static inline CUresult dev_tensor_map_3d(dev_encode_tiled_fn encode, CUtensorMap *map,
                                  CUtensorMapDataType type, const void *base, uint64_t batch,
                                  uint64_t rows, uint64_t cols, uint64_t row_stride_bytes,
                                  uint64_t matrix_stride_bytes, uint32_t box_batch,
                                  uint32_t box_rows, uint32_t box_cols,
                                  CUtensorMapSwizzle swizzle) {
    uint64_t dims[3], strides[2];
    uint32_t box[3];
    dims[0] = cols;
    dims[1] = rows;
    dims[2] = batch;
    strides[0] = row_stride_bytes;
    strides[1] = matrix_stride_bytes;
    box[0] = box_cols;
    box[1] = box_rows;
    box[2] = box_batch;
    return dev_tensor_map_nd(encode, map, type, 3, base, dims, strides, box, swizzle);
}

#endif
