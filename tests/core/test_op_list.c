/* The ops of the dispatcher-wide tests (TEST_OPS, op_calls.h: each family's
   tests/<family>/cases_<family>.h) against talon.h: every function declared as
   talon_status talon_<name>(talon_ctx *ctx, CUstream stream, const talon_<name>_args *...)
   is an op, and the list must hold each of them and nothing else (a missing op would go
   unfuzzed and unsoaked without a word). Reads include/talon.h: run from the repository root,
   as make test does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "talon.h"
#include "op_calls.h"

#define HEADER "include/talon.h"
#define MAX_OPS 256

/* talon.h with every run of white space one space, and none after a '(' (a declaration may
   break its line anywhere); NULL if unreadable */
static char *read_header(void) {
    FILE *f = fopen(HEADER, "rb");
    char *text = NULL;
    long n;
    int c, space = 0;
    size_t len = 0;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0)
        text = (char *)malloc((size_t)n + 1);
    while (text && (c = fgetc(f)) != EOF) {
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            space = 1;
            continue;
        }
        if (space && len && text[len - 1] != '(') text[len++] = ' ';
        space = 0;
        text[len++] = (char)c;
    }
    if (text) text[len] = '\0';
    fclose(f);
    return text;
}

/* the names (talon_<name>) of the ops text declares; returns how many */
static int declared_ops(const char *text, char names[][64]) {
    static const char start[] = "talon_status talon_";
    const char *p = text;
    int n = 0;
    while ((p = strstr(p, start)) != NULL) {
        const char *name = p + strlen("talon_status ");
        size_t len = strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_");
        char want[200];
        p = name + len;
        if (len >= 64 || len < strlen("talon_") + 1) continue;
        snprintf(want, sizeof want, "(talon_ctx *ctx, CUstream stream, const %.*s_args *",
                 (int)len, name);
        if (strncmp(p, want, strlen(want)) != 0) continue; /* not an op */
        assert_true(n < MAX_OPS);
        memcpy(names[n], name, len);
        names[n++][len] = '\0';
    }
    return n;
}

static int listed(const char *name) {
    int op;
    for (op = 0; op < NUM_OPS; op++)
        if (!strcmp(op_names[op], name)) return 1;
    return 0;
}

static void test_every_op_listed(void **state) {
    static char names[MAX_OPS][64];
    char *text = read_header();
    int n, i, op, missing = 0;
    (void)state;
    if (!text) fail_msg("cannot read %s (run from the repository root)", HEADER);
    n = declared_ops(text, names);
    free(text);
    for (i = 0; i < n; i++)
        if (!listed(names[i])) {
            print_error("talon.h declares the op %s, which TEST_OPS lacks (its family's "
                        "tests/<family>/cases_<family>.h)\n", names[i]);
            missing++;
        }
    for (op = 0; op < NUM_OPS; op++) {
        for (i = 0; i < n && strcmp(names[i], op_names[op]); i++) continue;
        if (i == n) {
            print_error("TEST_OPS lists %s, which talon.h does not declare as an op\n",
                        op_names[op]);
            missing++;
        }
    }
    if (missing) fail_msg("%d ops differ between talon.h and TEST_OPS", missing);
    assert_int_equal(n, NUM_OPS);
    printf("test_op_list: talon.h's %d ops, all in TEST_OPS\n", n);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_op_listed)};
    return cmocka_run_group_tests_name("test_op_list", tests, NULL, NULL);
}
