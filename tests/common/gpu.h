/* GPU access for the GPU tests, the benchmark and talon-info: the CUDA driver opened with
   dlopen (so talon-info runs, and says so, on a machine without one) and a primary context. */
#ifndef TALON_TESTS_GPU_H
#define TALON_TESTS_GPU_H
#include <stddef.h>
#include <time.h>
#include <cuda.h>
#include "talon.h"

/* X(name, ABI version, args): each resolved at the version whose signature is written here
   (cudaTypedefs.h: PFN_<name>_v<version>), never the header's CUDA_VERSION, whose variants of
   cuCtxSynchronize and cuCtxGetDevice take a context argument. */
#define GPU_FUNCS(X)                                                                           \
    X(cuInit, 2000, (unsigned int))                                                            \
    X(cuDeviceGetCount, 2000, (int *))                                                         \
    X(cuDeviceGet, 2000, (CUdevice *, int))                                                    \
    X(cuDeviceGetName, 2000, (char *, int, CUdevice))                                          \
    X(cuDevicePrimaryCtxRetain, 7000, (CUcontext *, CUdevice))                                 \
    X(cuCtxSetCurrent, 4000, (CUcontext))                                                      \
    X(cuCtxSynchronize, 2000, (void))                                                          \
    X(cuMemAlloc, 3020, (CUdeviceptr *, size_t))                                               \
    X(cuMemGetInfo, 3020, (size_t *, size_t *))                                                \
    X(cuMemFree, 3020, (CUdeviceptr))                                                          \
    X(cuMemcpyHtoD, 3020, (CUdeviceptr, const void *, size_t))                                 \
    X(cuMemcpyDtoH, 3020, (void *, CUdeviceptr, size_t))                                       \
    X(cuMemcpyDtoDAsync, 3020, (CUdeviceptr, CUdeviceptr, size_t, CUstream))                   \
    X(cuMemsetD8, 3020, (CUdeviceptr, unsigned char, size_t))                                  \
    X(cuStreamCreate, 2000, (CUstream *, unsigned int))                                        \
    X(cuStreamDestroy, 4000, (CUstream))                                                       \
    X(cuStreamSynchronize, 2000, (CUstream))                                                   \
    X(cuStreamBeginCapture, 10010, (CUstream, CUstreamCaptureMode))                            \
    X(cuStreamEndCapture, 10000, (CUstream, CUgraph *))                                        \
    X(cuGraphInstantiateWithFlags, 11040, (CUgraphExec *, CUgraph, unsigned long long))        \
    X(cuGraphLaunch, 10000, (CUgraphExec, CUstream))                                           \
    X(cuGraphExecDestroy, 10000, (CUgraphExec))                                                \
    X(cuGraphDestroy, 10000, (CUgraph))                                                        \
    X(cuEventCreate, 2000, (CUevent *, unsigned int))                                          \
    X(cuEventDestroy, 4000, (CUevent))                                                         \
    X(cuEventRecord, 2000, (CUevent, CUstream))                                                \
    X(cuEventSynchronize, 2000, (CUevent))                                                     \
    X(cuEventElapsedTime, 2000, (float *, CUevent, CUevent))                                   \
    X(cuGetErrorString, 6000, (CUresult, const char **))

typedef struct gpu_driver {
#define GPU_FIELD(name, version, args) CUresult (*name) args;
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

/* The GPU tests' driver calls: GPU_CK(call) prints the file, line, call and error on stderr
   when the call fails and sets gpu_call_failed, which the test reads (and clears) where it
   counts the case as failed. */
extern int gpu_call_failed;
void gpu_check(CUresult r, const char *file, int line, const char *call);
#define GPU_CK(call) gpu_check((call), __FILE__, __LINE__, #call)

/* cuMemAlloc of n bytes (16 when n is 0) through GPU_CK; 0 when it failed. */
CUdeviceptr gpu_alloc(size_t n);

/* Seconds elapsed since t0 (CLOCK_MONOTONIC). */
double gpu_seconds_since(const struct timespec *t0);

/* The process's resident host memory in bytes (/proc/self/statm), or -1: the leak checks. */
long gpu_resident_bytes(void);

/* One test function's cases, failures and checked elements, and its clock. */
typedef struct gpu_tally {
    const char *name;
    long long cases, failures, elements;
    struct timespec t0;
} gpu_tally;
void gpu_tally_start(gpu_tally *t, const char *name);
/* Prints "<name>: C cases, E elements checked, F failed, S s", adds the cases and elements to
   the program's totals and returns the failures (the test then calls cmocka's fail()). */
long long gpu_tally_end(const gpu_tally *t, long long *cases, long long *elements);

/* What a GPU test program sets up before its tests: the GPU, a talon ctx created with
   TALON_CTX_PRELOAD (so every test may capture graphs), one stream, and whether
   TALON_TEST_QUICK asks for the small grid (compute-sanitizer runs). */
typedef struct gpu_test {
    const char *prog;
    gpu g;
    talon_ctx *ctx;
    CUstream stream;
    int quick;
    struct timespec t0;
} gpu_test;

/* Opens everything and prints a banner line; returns 0, or -1 after saying why on stderr. */
int gpu_test_begin(gpu_test *t, const char *prog, unsigned stream_flags);

/* Prints "<prog>: C cases, E elements checked<what>, F failed tests, S s", releases what
   gpu_test_begin opened and returns the exit status (0 only when failed is 0). */
int gpu_test_end(gpu_test *t, const char *what, long long cases, long long elements,
                 int failed);
#endif
