/* GPU test on a machine with two or more H100/H200s: one talon_ctx per device in one process
   (each on its device's primary context), two threads running ops on both at once, every
   output checked; and a ctx's op called while the other device's context is current must run
   on its own device (its stream's) or fail with a driver error (the current device's legacy
   stream), never run on the wrong device. With a single GPU the program says
   so and exits 0 (there is nothing to check). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpu.h"
#include "talon.h"

#define ROWS 64
#define COLS 4096
#define ROUNDS 500

typedef struct device_job {
    int index;
    CUdevice dev;
    CUcontext cu;
    CUstream stream;
    talon_ctx *ctx;
    CUdeviceptr in, out, w;
    uint16_t want;      /* every output element: the weight (rows of ones normalise to ones) */
    int failures;
    long long checked;
} device_job;

static int setup(device_job *j, int index) {
    const size_t bytes = (size_t)ROWS * COLS * 2;
    uint16_t *h = (uint16_t *)malloc(bytes);
    talon_ctx_options o = {NULL, TALON_CTX_PRELOAD};
    int i;
    memset(j, 0, sizeof *j);
    j->index = index;
    j->want = index == 0 ? 0x3f80 : 0x4000; /* bf16 1.0, 2.0 */
    if (!h || cu.cuDeviceGet(&j->dev, index) || cu.cuDevicePrimaryCtxRetain(&j->cu, j->dev) ||
        cu.cuCtxSetCurrent(j->cu) || cu.cuStreamCreate(&j->stream, CU_STREAM_NON_BLOCKING))
        return -1;
    if (talon_ctx_create(&j->ctx, &o) != TALON_SUCCESS) {
        fprintf(stderr, "device %d: talon_ctx_create: %s\n", index, talon_last_error());
        return -1;
    }
    if (!(j->in = gpu_alloc(bytes)) || !(j->out = gpu_alloc(bytes)) || !(j->w = gpu_alloc(COLS * 2)))
        return -1;
    for (i = 0; i < ROWS * COLS; i++) h[i] = 0x3f80;
    GPU_CK(cu.cuMemcpyHtoD(j->in, h, bytes));
    for (i = 0; i < COLS; i++) h[i] = j->want;
    GPU_CK(cu.cuMemcpyHtoD(j->w, h, COLS * 2));
    free(h);
    return gpu_call_failed ? -1 : 0;
}

static talon_status run_op(const device_job *j) {
    talon_rmsnorm_args a;
    memset(&a, 0, sizeof a);
    a.out = j->out; a.in = j->in; a.weight = j->w; a.rows = ROWS; a.cols = COLS; a.eps = 1e-6f;
    return talon_rmsnorm(j->ctx, j->stream, &a);
}

static void *worker(void *arg) {
    device_job *j = (device_job *)arg;
    const size_t bytes = (size_t)ROWS * COLS * 2;
    uint16_t *h = (uint16_t *)malloc(bytes);
    int r, i;
    if (!h || cu.cuCtxSetCurrent(j->cu)) {
        j->failures++;
        free(h);
        return NULL;
    }
    for (r = 0; r < ROUNDS; r++) {
        GPU_CK(cu.cuMemsetD8(j->out, 0xff, bytes));
        if (run_op(j) != TALON_SUCCESS) {
            fprintf(stderr, "device %d round %d: %s\n", j->index, r, talon_last_error());
            j->failures++;
            break;
        }
        GPU_CK(cu.cuStreamSynchronize(j->stream));
        GPU_CK(cu.cuMemcpyDtoH(h, j->out, bytes));
        for (i = 0; i < ROWS * COLS; i++)
            if (h[i] != j->want) {
                if (j->failures++ < 4)
                    fprintf(stderr, "device %d round %d: out[%d] = 0x%04x, want 0x%04x\n",
                            j->index, r, i, h[i], j->want);
            }
        j->checked += ROWS * COLS;
    }
    free(h);
    return NULL;
}

int main(void) {
    gpu g;
    char err[512];
    int count = 0, d, failed = 0;
    device_job jobs[2];
    pthread_t threads[2];
    if (gpu_open(&g, err, sizeof err)) {
        fprintf(stderr, "test_gpu_multi: no GPU: %s\n", err);
        return 1;
    }
    GPU_CK(cu.cuDeviceGetCount(&count));
    if (count < 2) {
        printf("test_gpu_multi: %d GPU: this test needs two; nothing checked\n", count);
        return 0;
    }
    for (d = 0; d < 2; d++)
        if (setup(&jobs[d], d)) {
            fprintf(stderr, "test_gpu_multi: setting up device %d failed\n", d);
            return 1;
        }
    for (d = 0; d < 2; d++) pthread_create(&threads[d], NULL, worker, &jobs[d]);
    for (d = 0; d < 2; d++) pthread_join(threads[d], NULL);
    for (d = 0; d < 2; d++) failed += jobs[d].failures;
    /* Device 1's context current, device 0's ctx called. On device 0's stream the launch
       follows the stream to device 0 (checked there); on the legacy stream 0, which is device
       1's, device 0's kernel cannot run: a driver error, never a launch on device 1. */
    GPU_CK(cu.cuCtxSetCurrent(jobs[1].cu));
    {
        const size_t bytes = (size_t)ROWS * COLS * 2;
        uint16_t *h = (uint16_t *)malloc(bytes);
        device_job wrong = jobs[0];
        talon_status s;
        int i, bad = 0;
        GPU_CK(cu.cuCtxSetCurrent(jobs[0].cu)); /* poison and read back on device 0 */
        GPU_CK(cu.cuMemsetD8(jobs[0].out, 0xff, bytes));
        GPU_CK(cu.cuCtxSetCurrent(jobs[1].cu));
        s = run_op(&jobs[0]);
        GPU_CK(cu.cuCtxSetCurrent(jobs[0].cu));
        GPU_CK(cu.cuStreamSynchronize(jobs[0].stream));
        GPU_CK(cu.cuMemcpyDtoH(h, jobs[0].out, bytes));
        GPU_CK(cu.cuCtxSetCurrent(jobs[1].cu));
        for (i = 0; h && i < ROWS * COLS; i++) bad += h[i] != jobs[0].want;
        printf("test_gpu_multi: device 0's ctx on its stream with device 1 current: %s, "
               "%d wrong elements on device 0\n", talon_status_string(s), bad);
        failed += s != TALON_SUCCESS || bad || !h;
        wrong.stream = NULL;
        s = run_op(&wrong);
        printf("test_gpu_multi: device 0's ctx on stream 0 with device 1 current: %s (%s)\n",
               talon_status_string(s), s == TALON_SUCCESS ? "launched" : talon_last_error());
        failed += s == TALON_SUCCESS;
        cu.cuCtxSynchronize();
        free(h);
    }
    printf("test_gpu_multi: 2 devices, %d rounds each at once, %lld + %lld elements checked, "
           "%d failures%s\n", ROUNDS, jobs[0].checked, jobs[1].checked, failed,
           gpu_call_failed ? ", driver calls failed" : "");
    for (d = 0; d < 2; d++) {
        cu.cuCtxSetCurrent(jobs[d].cu);
        talon_ctx_destroy(jobs[d].ctx);
    }
    return failed || gpu_call_failed ? 1 : 0;
}
