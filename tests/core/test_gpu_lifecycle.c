/* GPU test (H100/H200) of the context's life cycle: 1000 times (TALON_TEST_QUICK: 100) create a
   talon_ctx with every module loaded (TALON_CTX_PRELOAD), run an op, check its output and
   destroy the ctx. Neither the device's free memory nor the process's resident memory may grow
   between cycle 50 (everything warm) and the last: at most 2 MiB on the device (the driver's
   own pools move by less) and 8 MiB on the host. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "gpu.h"
#include "talon.h"

static gpu_test g;
static long long g_elements;

static void test_create_destroy(void **state) {
    enum { ROWS = 16, COLS = 4096, WARM = 50 };
    const int cycles = g.quick ? 100 : 1000;
    const size_t bytes = (size_t)ROWS * COLS * 2;
    uint16_t *host = (uint16_t *)malloc(bytes);
    CUdeviceptr in = gpu_alloc(bytes), out = gpu_alloc(bytes), w = gpu_alloc(COLS * 2);
    size_t free0 = 0, free1 = 0, total = 0;
    long rss0 = 0, rss1 = 0;
    int i, c;
    (void)state;
    assert_non_null(host);
    for (i = 0; i < ROWS * COLS; i++) host[i] = 0x3f80; /* bf16 1.0 */
    GPU_CK(cu.cuMemcpyHtoD(in, host, bytes));
    GPU_CK(cu.cuMemcpyHtoD(w, host, COLS * 2));
    for (c = 0; c < cycles; c++) {
        talon_ctx_options o = {NULL, TALON_CTX_PRELOAD};
        talon_rmsnorm_args a;
        talon_ctx *ctx = NULL;
        if (talon_ctx_create(&ctx, &o) != TALON_SUCCESS)
            fail_msg("cycle %d: talon_ctx_create: %s", c, talon_last_error());
        memset(&a, 0, sizeof a);
        a.out = out; a.in = in; a.weight = w; a.rows = ROWS; a.cols = COLS; a.eps = 1e-6f;
        GPU_CK(cu.cuMemsetD8(out, 0xff, bytes));
        if (talon_rmsnorm(ctx, g.stream, &a) != TALON_SUCCESS)
            fail_msg("cycle %d: talon_rmsnorm: %s", c, talon_last_error());
        GPU_CK(cu.cuStreamSynchronize(g.stream));
        talon_ctx_destroy(ctx);
        if (c == cycles - 1 || c % 97 == 0) { /* rows of ones normalise to ones */
            GPU_CK(cu.cuMemcpyDtoH(host, out, bytes));
            for (i = 0; i < ROWS * COLS; i++)
                if (host[i] != 0x3f80) fail_msg("cycle %d: out[%d] = 0x%04x", c, i, host[i]);
            g_elements += ROWS * COLS;
        }
        if (c == WARM) {
            GPU_CK(cu.cuMemGetInfo(&free0, &total));
            rss0 = gpu_resident_bytes();
        }
    }
    GPU_CK(cu.cuMemGetInfo(&free1, &total));
    rss1 = gpu_resident_bytes();
    print_message("test_gpu_lifecycle: %d contexts created, preloaded, used and destroyed; from "
                  "cycle %d to the last the device's free memory moved by %+.2f MiB, the "
                  "resident host memory by %+.2f MiB\n", cycles, WARM,
                  ((double)free1 - (double)free0) / 1048576.0,
                  ((double)rss1 - (double)rss0) / 1048576.0);
    assert_true(gpu_call_failed == 0);
    assert_true((double)free0 - (double)free1 <= 2.0 * 1048576);
    assert_true(rss0 > 0 && rss1 - rss0 <= 8L * 1048576);
    cu.cuMemFree(in); cu.cuMemFree(out); cu.cuMemFree(w);
    free(host);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_create_destroy)};
    int failed;
    if (gpu_test_begin(&g, "test_gpu_lifecycle", CU_STREAM_NON_BLOCKING)) return 1;
    failed = cmocka_run_group_tests_name("talon context life cycle", tests, NULL, NULL);
    return gpu_test_end(&g, "", 1, g_elements, failed);
}
