/* talon/impl/tma.h - TMA tensor maps, encoded on the host through the driver's
   cuTensorMapEncodeTiled and passed to kernels as __grid_constant__ CUtensorMap parameters
   (kernels/dev/tma.cuh loads and stores through them). Part of talon.h's implementation
   (TALON_IMPLEMENTATION); not a public header.

   The rules the driver enforces are checked here first, so the message names the tensor and
   the rule rather than the driver's CUDA_ERROR_INVALID_VALUE:
   - base 16-byte aligned; rank 1..5; every dimension in [1, 2^32];
   - every stride but the innermost (the element) a multiple of 16 bytes and below 2^40;
   - box dimensions in [1, 256]; the box's inner extent a multiple of 16 bytes and, with a
     swizzle, at most the swizzle span (32, 64 or 128 bytes).
   Boxes are dense (element strides 1); out-of-bounds elements load as zero and are not
   stored; L2 promotion 128 B. Rules the device adds (kernels/dev/README.md): the innermost
   coordinate of a copy a multiple of 16 bytes, store coordinates >= 0. No stream is touched:
   legal during stream capture. */
#ifndef TALON_IMPL_TMA_H
#define TALON_IMPL_TMA_H

typedef struct talon__tensor_map_shape {
    CUtensorMapDataType type;
    int rank;                 /* 1..5 */
    uint64_t dims[5];         /* elements, dims[0] innermost */
    uint64_t strides[4];      /* bytes between consecutive indices of dims[1..rank-1] */
    uint32_t box[5];          /* elements per box along each dimension */
    CUtensorMapSwizzle swizzle;
} talon__tensor_map_shape;

static int talon__tensor_map_elem_bytes(CUtensorMapDataType t) {
    switch (t) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32: return 4;
    default: return 0;
    }
}

static int talon__tensor_map_span(CUtensorMapSwizzle s) {
    return s == CU_TENSOR_MAP_SWIZZLE_32B ? 32 : s == CU_TENSOR_MAP_SWIZZLE_64B ? 64
         : s == CU_TENSOR_MAP_SWIZZLE_128B ? 128 : 0;
}

/* Encodes *map for tensor `name` of op `op` at base (a device address). Errors:
   INVALID_ARGUMENT naming the tensor and the rule, DRIVER with the CUresult. */
static talon_status talon__tensor_map(const talon_ctx *ctx, const char *op, const char *name,
                                      CUtensorMap *map, CUdeviceptr base,
                                      const talon__tensor_map_shape *t) {
    cuuint64_t dims[5], strides[4];
    cuuint32_t box[5], ones[5] = {1, 1, 1, 1, 1};
    const int elem = talon__tensor_map_elem_bytes(t->type), span = talon__tensor_map_span(t->swizzle);
    char what[96];
    CUresult r;
    int i;
    if (!elem)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->%s: TMA element type %d is "
                           "not supported", op, name, (int)t->type);
    if (t->rank < 1 || t->rank > 5)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->%s: TMA rank %d is not in "
                           "[1, 5]", op, name, t->rank);
    if (base % 16)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->%s = 0x%llx must be 16-byte "
                           "aligned (TMA)", op, name, (unsigned long long)base);
    for (i = 0; i < t->rank; i++) {
        if (t->dims[i] < 1 || t->dims[i] > (1ull << 32))
            return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->%s: dimension %d = %llu "
                               "is not in [1, 2^32] (TMA)", op, name, i,
                               (unsigned long long)t->dims[i]);
        if (t->box[i] < 1 || t->box[i] > 256)
            return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->%s: box dimension %d = %u "
                               "is not in [1, 256] (TMA)", op, name, i, t->box[i]);
        dims[i] = t->dims[i];
        box[i] = t->box[i];
    }
    for (i = 0; i + 1 < t->rank; i++) {
        if (t->strides[i] % 16 || t->strides[i] >= (1ull << 40))
            return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->%s: stride %d = %llu bytes "
                               "must be a multiple of 16 below 2^40 (TMA)", op, name, i + 1,
                               (unsigned long long)t->strides[i]);
        strides[i] = t->strides[i];
    }
    if (t->box[0] * (uint32_t)elem % 16)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->%s: a box row of %u bytes "
                           "must be a multiple of 16 (TMA)", op, name, t->box[0] * (uint32_t)elem);
    if (span && t->box[0] * (uint32_t)elem > (uint32_t)span)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->%s: a box row of %u bytes "
                           "exceeds the %d-byte swizzle span (TMA)", op, name,
                           t->box[0] * (uint32_t)elem, span);
    r = ctx->drv->cuTensorMapEncodeTiled(map, t->type, (cuuint32_t)t->rank,
                                         (void *)(uintptr_t)base, dims, strides, box, ones,
                                         CU_TENSOR_MAP_INTERLEAVE_NONE, t->swizzle,
                                         CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r == CUDA_SUCCESS) return TALON_SUCCESS;
    snprintf(what, sizeof what, "%s: cuTensorMapEncodeTiled(args->%s)", op, name);
    return talon__fail_cu(ctx->drv, TALON_ERROR_DRIVER, r, what);
}

#endif
