/* The example loaders' tests register one cmocka test per table row (a row is the test's
   state): add() them, then _cmocka_run_group_tests(name, tests, ntests, ...). */
#ifndef TALON_TESTS_EXAMPLES_REGISTRY_H
#define TALON_TESTS_EXAMPLES_REGISTRY_H
#define TEST_MAX 256
static struct CMUnitTest tests[TEST_MAX];
static size_t ntests;

static void add(const char *name, CMUnitTestFunction fn, const void *row) {
    if (ntests == TEST_MAX) abort(); /* a test program bug: raise TEST_MAX */
    memset(&tests[ntests], 0, sizeof tests[ntests]);
    tests[ntests].name = name;
    tests[ntests].test_func = fn;
    tests[ntests].initial_state = (void *)(uintptr_t)row; /* rows are read-only */
    ntests++;
}
#define ADD(fn) add(#fn, fn, NULL)
#endif
