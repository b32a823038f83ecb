/* See gpu.h. */
#include "gpu.h"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

gpu_driver cu;

const char *gpu_error(CUresult r) {
    const char *s = NULL;
    if (!cu.cuGetErrorString || cu.cuGetErrorString(r, &s) != CUDA_SUCCESS || !s) return "?";
    return s;
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
#define GPU_RESOLVE(name, version, args)                                                       \
    if (get_proc(#name, (void **)&cu.name, version, CU_GET_PROC_ADDRESS_DEFAULT, NULL) ||      \
        !cu.name) {                                                                            \
        snprintf(err, errlen, "driver lacks %s", #name);                                      \
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
