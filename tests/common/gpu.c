/* See gpu.h. */
#define _POSIX_C_SOURCE 200809L
#include "gpu.h"
#include <dlfcn.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

gpu_driver cu;
int gpu_call_failed;

const char *gpu_error(CUresult r) {
    const char *s = NULL;
    if (!cu.cuGetErrorString || cu.cuGetErrorString(r, &s) != CUDA_SUCCESS || !s) return "?";
    return s;
}

void gpu_check(CUresult r, const char *file, int line, const char *call) {
    if (r == CUDA_SUCCESS) return;
    fprintf(stderr, "%s:%d: %s failed: %s\n", file, line, call, gpu_error(r));
    gpu_call_failed = 1;
}

CUdeviceptr gpu_alloc(size_t n) {
    CUdeviceptr p = 0;
    GPU_CK(cu.cuMemAlloc(&p, n ? n : 16));
    return p;
}

int gpu_open(gpu *g, char *err, size_t errlen) {
    typedef CUresult (*get_proc_fn)(const char *, void **, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult *);
    get_proc_fn get_proc;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int count = 0;
    CUresult r;
    memset(g, 0, sizeof *g);
    if (!lib) {
        snprintf(err, errlen, "no NVIDIA driver: libcuda.so.1 could not be loaded");
        return -1;
    }
    *(void **)(&get_proc) = dlsym(lib, "cuGetProcAddress_v2");
    if (!get_proc) {
        snprintf(err, errlen, "libcuda.so.1 has no cuGetProcAddress_v2 (driver too old)");
        return -1;
    }
/* The toolkit's stub libcuda (lib64/stubs, for linking only) answers every lookup with
   CUDA_ERROR_STUB_LIBRARY: name the cause rather than a missing function. */
#define GPU_RESOLVE(name, version, args)                                                       \
    if ((r = get_proc(#name, (void **)&cu.name, version, CU_GET_PROC_ADDRESS_DEFAULT, NULL)) || \
        !cu.name) {                                                                            \
        if (r == CUDA_ERROR_STUB_LIBRARY)                                                      \
            snprintf(err, errlen, "libcuda.so.1 is the CUDA toolkit's stub library "           \
                     "(CUDA_ERROR_STUB_LIBRARY, %d), not a driver: put the NVIDIA driver's "   \
                     "libcuda.so.1 first on the library path", (int)r);                        \
        else                                                                                   \
            snprintf(err, errlen, "libcuda.so.1 could not resolve %s (CUresult %d)", #name,    \
                     (int)r);                                                                  \
        return -1;                                                                             \
    }
    GPU_FUNCS(GPU_RESOLVE)
#undef GPU_RESOLVE
    if ((r = cu.cuInit(0)) != CUDA_SUCCESS || (r = cu.cuDeviceGetCount(&count)) != CUDA_SUCCESS) {
        snprintf(err, errlen, "cuInit failed: %s", gpu_error(r));
        return -1;
    }
    if (count < 1) {
        snprintf(err, errlen, "no CUDA device present");
        return -1;
    }
    if ((r = cu.cuDeviceGet(&g->dev, 0)) || (r = cu.cuDeviceGetName(g->name, sizeof g->name, g->dev)) ||
        (r = cu.cuDevicePrimaryCtxRetain(&g->ctx, g->dev)) || (r = cu.cuCtxSetCurrent(g->ctx))) {
        snprintf(err, errlen, "opening device 0 failed: %s", gpu_error(r));
        return -1;
    }
    return 0;
}

double gpu_seconds_since(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) * 1e-9;
}

int gpu_test_begin(gpu_test *t, const char *prog, unsigned stream_flags) {
    talon_ctx_options options = {NULL, TALON_CTX_PRELOAD};
    const char *quick = getenv("TALON_TEST_QUICK");
    const talon_bundle_info *bi = talon_bundle_info_get();
    char err[512];
    CUresult r;
    memset(t, 0, sizeof *t);
    t->prog = prog;
    clock_gettime(CLOCK_MONOTONIC, &t->t0);
    if (gpu_open(&t->g, err, sizeof err)) {
        fprintf(stderr, "%s: no GPU: %s (this test needs an H100/H200)\n", prog, err);
        return -1;
    }
    if (talon_ctx_create(&t->ctx, &options) != TALON_SUCCESS) {
        fprintf(stderr, "%s: talon_ctx_create on \"%s\" failed: %s\n", prog, t->g.name,
                talon_last_error());
        return -1;
    }
    if ((r = cu.cuStreamCreate(&t->stream, stream_flags)) != CUDA_SUCCESS) {
        fprintf(stderr, "%s: cuStreamCreate failed: %s\n", prog, gpu_error(r));
        return -1;
    }
    t->quick = quick && strcmp(quick, "0") != 0;
    printf("%s: %s, talon %s (%s, nvcc %s), %s grid\n", prog, t->g.name, bi->version,
           bi->git_commit, bi->nvcc_version, t->quick ? "quick (TALON_TEST_QUICK)" : "full");
    fflush(stdout);
    return 0;
}

void gpu_tally_start(gpu_tally *t, const char *name) {
    memset(t, 0, sizeof *t);
    t->name = name;
    clock_gettime(CLOCK_MONOTONIC, &t->t0);
}

long long gpu_tally_end(const gpu_tally *t, long long *cases, long long *elements) {
    printf("%s: %lld cases, %lld elements checked, %lld failed, %.1f s\n", t->name, t->cases,
           t->elements, t->failures, gpu_seconds_since(&t->t0));
    *cases += t->cases;
    *elements += t->elements;
    return t->failures;
}

int gpu_test_end(gpu_test *t, const char *what, long long cases, long long elements,
                 int failed) {
    printf("%s: %lld cases, %lld elements checked%s, %d failed tests, %.1f s\n", t->prog, cases,
           elements, what, failed, gpu_seconds_since(&t->t0));
    cu.cuStreamDestroy(t->stream);
    talon_ctx_destroy(t->ctx);
    return failed ? 1 : 0;
}

long gpu_resident_bytes(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE);
}
