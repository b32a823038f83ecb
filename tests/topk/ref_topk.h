/* CPU reference for talon_topk: the order it documents, written from the values themselves
   (no keys): every NaN ranks above +inf, -0.0 equals +0.0, equal values go to the lower index. */
#ifndef TALON_TESTS_REF_TOPK_H
#define TALON_TESTS_REF_TOPK_H
#include <stdint.h>

/* 1 when x[i] ranks above x[j] in talon_topk's order (i != j). */
int ref_topk_before(const float *x, int64_t i, int64_t j);

/* The k indices of the k top-ranked of n values, best first (the sorted output). */
void ref_topk_row(const float *x, int64_t n, int64_t k, int32_t *idx);
#endif
