/* talon-info: what this build of talon contains, and (with a GPU) a smoke test of every op.

   Prints the bundle facts (version, commit, nvcc, arch, images, kernels). Without a driver or
   GPU it says so in one line and exits 1. With one, it creates a talon context (exit 1 with
   talon's message if that fails, e.g. not an H100/H200), runs every op once on bf16
   64 x 4096, checks every element against the fp64 CPU reference (tests/common/opcheck.h) and
   times a second launch with CUDA events. Exit status: 0 when every op passed. */
#include <stdio.h>
#include <string.h>
#include "gpu.h"
#include "opcheck.h"
#include "talon.h"

static void usage(FILE *f) {
    fprintf(f, "usage: talon-info [--help]\n"
               "  prints what this build of talon contains; with an H100/H200, runs every op once\n"
               "  and checks it (exit 0 when all pass; 1 without a GPU or on a failure)\n");
}

int main(int argc, char **argv) {
    const talon_bundle_info *b = talon_bundle_info_get();
    const int v = talon_version();
    talon_ctx_options options = {NULL, TALON_CTX_PRELOAD};
    talon_ctx *ctx = NULL;
    CUstream stream = NULL;
    talon_status s;
    CUresult e;
    gpu g;
    char err[512];
    int k, failed = 0;

    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "talon-info: unknown argument '%s'\n", argv[1]);
        usage(stderr);
        return 2;
    }
    printf("talon %s (talon_version() %d.%d.%d, header %s)\n", b->version, v / 10000,
           v / 100 % 100, v % 100, TALON_VERSION_STRING);
    printf("  commit   %s\n", b->git_commit);
    printf("  nvcc     %s\n", b->nvcc_version);
    printf("  arch     %s\n", b->arch);
    printf("  images   %d\n", b->num_images);
    printf("  kernels  %d\n", b->num_kernels);
    for (k = 0; k < b->num_kernels; k++) printf("    %s\n", b->kernel_names[k]);
    if (v != TALON_VERSION_MAJOR * 10000 + TALON_VERSION_MINOR * 100 + TALON_VERSION_PATCH)
        printf("warning: talon_version() does not match this header (%s)\n", TALON_VERSION_STRING);
    fflush(stdout);

    if (gpu_open(&g, err, sizeof err)) {
        printf("no GPU: %s; bundle info above, no ops run\n", err);
        return 1;
    }
    printf("device 0: %s\n", g.name);
    if ((s = talon_ctx_create(&ctx, &options)) != TALON_SUCCESS) {
        printf("talon_ctx_create failed (%s): %s\n", talon_status_string(s), talon_last_error());
        return 1;
    }
    if ((e = cu.cuStreamCreate(&stream, CU_STREAM_DEFAULT)) != CUDA_SUCCESS) {
        printf("cuStreamCreate failed: %s\n", gpu_error(e));
        talon_ctx_destroy(ctx);
        return 1;
    }
    printf("ops (bf16, 64 x 4096, every element against the fp64 reference; time of one launch):\n");
    for (k = 0; k < OPCHECK_NUM_OPS; k++) {
        opcheck_case c;
        opcheck_result r;
        memset(&c, 0, sizeof c);
        c.op = (opcheck_op)k;
        c.dtype = TALON_DTYPE_BF16;
        c.rows = 64;
        c.cols = 4096;
        c.seed = 1;
        c.timed = 1;
        if (opcheck_run(ctx, stream, &c, &r) == 0) {
            printf("  %-18s PASS  max abs err %-9.3g (%.2f ulp, %.2f of tolerance)  %8.1f us\n",
                   opcheck_op_name(c.op), r.max_abs, r.max_ulp, r.max_tol_ratio, r.time_us);
        } else {
            char line[1024];
            opcheck_format(&r, line, sizeof line);
            printf("  %-18s FAIL  %s\n", opcheck_op_name(c.op), line);
            failed++;
        }
    }
    cu.cuStreamDestroy(stream);
    talon_ctx_destroy(ctx);
    opcheck_cleanup();
    if (failed) printf("%d of %d ops FAILED\n", failed, (int)OPCHECK_NUM_OPS);
    else printf("all %d ops passed\n", (int)OPCHECK_NUM_OPS);
    return failed ? 1 : 0;
}
