/* talon/impl/paged_kv.h - the paged KV cache geometry shared by kv_append, decode and (later) prefill. Part of talon.h's implementation (TALON_IMPLEMENTATION); not a
   public header. */
#ifndef TALON_IMPL_PAGED_KV_H
#define TALON_IMPL_PAGED_KV_H

/* The smallest l with 2^l >= v (log2 of a power of two). */
static uint32_t talon__ceil_log2(uint64_t v) {
    uint32_t l = 0;
    while ((1ull << l) < v) l++;
    return l;
}

/* The paged cache's geometry for `layout` (kv_append, decode): s[0] rows of s[1] per page (a
   slot's row in NHD, a head's in HND), s[1] the stride between slots of a page and s[2] between
   kv heads, in units of one head's row (unit: D elements or D * element bytes). */
static talon_status talon__kv_strides(const char *op, talon_kv_layout layout, int64_t page_size,
                                      int64_t heads, int64_t unit, int64_t s[3]) {
    s[0] = layout == TALON_KV_NHD ? page_size : page_size * heads;
    s[1] = layout == TALON_KV_NHD ? heads * unit : unit;
    s[2] = layout == TALON_KV_NHD ? unit : page_size * unit;
    if (layout == TALON_KV_NHD || layout == TALON_KV_HND) return TALON_SUCCESS;
    return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                       "%s: args->layout = %d is not supported (TALON_KV_NHD = %d, "
                       "TALON_KV_HND = %d)", op, (int)layout, (int)TALON_KV_NHD,
                       (int)TALON_KV_HND);
}

#endif
