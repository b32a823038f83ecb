/* talon/impl/paged_kv.h - the paged KV cache geometry shared by kv_append, decode and prefill. Part of talon.h's implementation (TALON_IMPLEMENTATION); not a
   public header. */
#ifndef TALON_IMPL_PAGED_KV_H
#define TALON_IMPL_PAGED_KV_H

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

/* page_size a power of two in [1, 256], max_kv_len in [1, 2^30] and a page-table row long
   enough for max_kv_len (decode, prefill); *pt_stride = the row stride (0: the pages of
   max_kv_len). */
static talon_status talon__check_pages(const char *op, int64_t page_size, int64_t max_kv_len,
                                       int64_t page_table_stride, int64_t *pt_stride) {
    int64_t pages;
    if (page_size < 1 || page_size > 256 || (page_size & (page_size - 1)))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->page_size = %lld is not a power of two in [1, 256]", op,
                           (long long)page_size);
    TALON__TRY(talon__check_range(op, "max_kv_len", max_kv_len, 1, 1 << 30));
    pages = (max_kv_len + page_size - 1) / page_size;
    if (page_table_stride && page_table_stride < pages)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->page_table_stride = %lld is shorter than the %lld pages "
                           "of max_kv_len = %lld",
                           op, (long long)page_table_stride, (long long)pages,
                           (long long)max_kv_len);
    *pt_stride = page_table_stride ? page_table_stride : pages;
    return TALON_SUCCESS;
}

#endif
