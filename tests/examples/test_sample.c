/* Tests of examples/sample.c (top-k sampling from sorted candidates): the draws follow the
   softmax of value / temperature, a tiny temperature picks the first candidate, non-finite
   values weigh nothing, and the generator's state alone decides the draw. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "../../examples/sample.h"
#include "registry.h"

/* 400k draws from 5 candidates: every frequency within 5 standard deviations of its
   probability exp(v / T) / sum. */
static void test_distribution(void **state) {
    static const float values[] = {3.0f, 2.5f, 2.5f, 1.0f, -4.0f};
    static const int32_t ids[] = {17, 4, 9, 1000, 5};
    const float temps[] = {1.0f, 0.5f, 2.0f};
    int t, i, n;
    (void)state;
    for (t = 0; t < 3; t++) {
        double p[5], sum = 0;
        long count[5] = {0};
        uint64_t rng = 42 + (uint64_t)t;
        const int draws = 400000;
        for (i = 0; i < 5; i++) sum += p[i] = exp(values[i] / temps[t]);
        for (n = 0; n < draws; n++) {
            const int32_t id = sample_top_k(values, ids, 5, temps[t], &rng);
            for (i = 0; i < 5 && ids[i] != id; i++) {}
            assert_true(i < 5);
            count[i]++;
        }
        for (i = 0; i < 5; i++) {
            const double q = p[i] / sum, sd = sqrt(draws * q * (1 - q));
            if (fabs((double)count[i] - draws * q) > 5 * sd + 1)
                fail_msg("T %g candidate %d: %ld draws, expected %.0f +- %.0f", temps[t], i,
                         count[i], draws * q, sd);
        }
    }
}

static void test_cold_and_single(void **state) {
    static const float values[] = {1.0f, 0.9f, 0.8f};
    static const int32_t ids[] = {7, 8, 9};
    uint64_t rng = 1;
    int n;
    (void)state;
    for (n = 0; n < 1000; n++) {
        assert_int_equal(sample_top_k(values, ids, 3, 1e-4f, &rng), 7);
        assert_int_equal(sample_top_k(values, ids, 1, 1.0f, &rng), 7);
    }
}

static void test_non_finite(void **state) {
    const float nan = NAN, inf = INFINITY;
    const float v1[] = {nan, 2.0f, -inf, 2.0f}, v2[] = {nan, nan}, v3[] = {-inf, -inf};
    static const int32_t ids[] = {10, 11, 12, 13};
    uint64_t rng = 3;
    long c11 = 0;
    int n;
    (void)state;
    for (n = 0; n < 10000; n++) {
        const int32_t id = sample_top_k(v1, ids, 4, 1.0f, &rng);
        assert_true(id == 11 || id == 13);
        c11 += id == 11;
        assert_int_equal(sample_top_k(v2, ids, 2, 1.0f, &rng), 10);
        assert_int_equal(sample_top_k(v3, ids, 2, 1.0f, &rng), 10);
    }
    assert_in_range(c11, 4700, 5300); /* two equal finite values: half each */
}

static void test_reproducible(void **state) {
    static const float values[] = {0.1f, 0.0f, -0.1f, -0.2f};
    static const int32_t ids[] = {1, 2, 3, 4};
    uint64_t a = 99, b = 99;
    int n;
    (void)state;
    for (n = 0; n < 1000; n++)
        assert_int_equal(sample_top_k(values, ids, 4, 1.0f, &a),
                         sample_top_k(values, ids, 4, 1.0f, &b));
    assert_true(a == b && a != 99);
}

int main(void) {
    ADD(test_distribution);
    ADD(test_cold_and_single);
    ADD(test_non_finite);
    ADD(test_reproducible);
    return _cmocka_run_group_tests("sample", tests, ntests, NULL, NULL);
}
