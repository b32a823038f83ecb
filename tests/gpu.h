/* GPU access for the GPU tests, the benchmark and talon-info: the CUDA driver opened with
   dlopen (so talon-info runs, and says so, on a machine without one) and a primary context. */
#ifndef TALON_TESTS_GPU_H
#define TALON_TESTS_GPU_H
#include <stddef.h>
#include <cuda.h>

#define GPU_FUNCS(X)                                                                           \
    X(cuInit, (unsigned int))                                                                  \
    X(cuDeviceGetCount, (int *))                                                               \
    X(cuDeviceGet, (CUdevice *, int))                                                          \
    X(cuDeviceGetName, (char *, int, CUdevice))                                                \
    X(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice))                                       \
    X(cuCtxSetCurrent, (CUcontext))                                                            \
    X(cuCtxSynchronize, (void))                                                                \
    X(cuMemAlloc, (CUdeviceptr *, size_t))                                                     \
    X(cuMemFree, (CUdeviceptr))                                                                \
    X(cuMemcpyHtoD, (CUdeviceptr, const void *, size_t))                                       \
    X(cuMemcpyDtoH, (void *, CUdeviceptr, size_t))                                             \
    X(cuMemcpyDtoDAsync, (CUdeviceptr, CUdeviceptr, size_t, CUstream))                         \
    X(cuMemsetD8, (CUdeviceptr, unsigned char, size_t))                                        \
    X(cuStreamCreate, (CUstream *, unsigned int))                                              \
    X(cuStreamDestroy, (CUstream))                                                             \
    X(cuStreamSynchronize, (CUstream))                                                         \
    X(cuStreamBeginCapture, (CUstream, CUstreamCaptureMode))                                   \
    X(cuStreamEndCapture, (CUstream, CUgraph *))                                               \
    X(cuGraphInstantiate, (CUgraphExec *, CUgraph, unsigned long long))                        \
    X(cuGraphLaunch, (CUgraphExec, CUstream))                                                  \
    X(cuGraphExecDestroy, (CUgraphExec))                                                       \
    X(cuGraphDestroy, (CUgraph))                                                               \
    X(cuEventCreate, (CUevent *, unsigned int))                                                \
    X(cuEventDestroy, (CUevent))                                                               \
    X(cuEventRecord, (CUevent, CUstream))                                                      \
    X(cuEventSynchronize, (CUevent))                                                           \
    X(cuEventElapsedTime, (float *, CUevent, CUevent))                                         \
    X(cuGetErrorString, (CUresult, const char **))

typedef struct gpu_driver {
#define GPU_FIELD(name, args) CUresult (*name) args;
    GPU_FUNCS(GPU_FIELD)
#undef GPU_FIELD
} gpu_driver;

extern gpu_driver cu; /* filled by gpu_open */

typedef struct gpu {
    CUdevice dev;
    CUcontext ctx;
    char name[256];
} gpu;

/* Opens the driver and makes device 0's primary context current. Returns 0, or -1 with a
   plain message in err (no driver, no device, ...). */
int gpu_open(gpu *g, char *err, size_t errlen);

/* Text for a CUresult ("?" if the driver has none). */
const char *gpu_error(CUresult r);
#endif
