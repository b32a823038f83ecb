/* A fake CUDA driver for the dispatcher tests (no GPU), with cmocka fixtures and message
   assertions. Included once by each tests/<dir>/test_<name>.c; it defines TALON_IMPLEMENTATION and
   includes talon.h, so a test reaches the private statics. The fake is injected through
   talon__driver_fake; it records every launch (fake.log, the last one also in fake.last). */
#ifndef TALON_TESTS_FAKE_DRIVER_H
#define TALON_TESTS_FAKE_DRIVER_H
#define _POSIX_C_SOURCE 200809L
#define TALON_IMPLEMENTATION
#include "talon.h"

#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

/* ================================================================ fake driver */
#define FAKE_CU ((CUcontext)(uintptr_t)0xC0C0)
#define FAKE_MAX 1024 /* modules and function handles: more than the kernels of the table */

typedef struct fake_launch {
    CUfunction fn;
    unsigned grid[3], block[3], smem;
    CUstream stream;
    void **extra;
    int dependent; /* cuLaunchKernelEx with programmatic stream serialization */
    int param_size;
    unsigned char params[1024]; /* the largest params struct (the GEMM's 512) fits */
} fake_launch;

#define FAKE_LOG 16 /* launches kept in fake.log; fake.launches counts them all */
#define FAKE_ENC_LOG 8
#define FAKE_ALLOCS 16 /* live cuMemAlloc blocks (checked mode's records) */

static struct fake {
    pthread_mutex_t lock;
    /* configuration */
    int major, minor, sms, driver_version;
    const char *name;
    CUcontext current;
    CUresult load_result;     /* cuModuleLoadData fails with this ... */
    int load_fail_image;      /* ... for this image only, or every image when -1 */
    const char *getfn_fail_symbol;
    CUresult launch_result;
    CUstreamCaptureStatus capture;
    CUresult encode_result;   /* cuTensorMapEncodeTiled fails with this */
    int fault_at;             /* fault injection: the fault_at-th counted driver call (1-based;
                                 the error-text calls are not counted) fails with fault_result */
    CUresult fault_result;
    int calls;                /* counted driver calls so far */
    const char *fault_call;   /* the call that failed, once it has */
    int quick_loads;          /* cuModuleLoadData without its nap (tests with no threads) */
    /* observations */
    int memsets; /* cuMemsetD32Async calls, the last one's arguments in fill */
    struct { CUdeviceptr dst; unsigned value; size_t n; CUstream stream; int before_launch; } fill;
    int encodes; /* cuTensorMapEncodeTiled calls, the last one's arguments in enc, the first
                    FAKE_ENC_LOG in enc_log */
    struct fake_enc {
        CUtensorMapDataType type;
        cuuint32_t rank, box[5], elem_strides[5];
        void *addr;
        cuuint64_t dims[5], strides[4];
        CUtensorMapInterleave interleave;
        CUtensorMapSwizzle swizzle;
        CUtensorMapL2promotion l2;
        CUtensorMapFloatOOBfill oob;
    } enc, enc_log[FAKE_ENC_LOG];
    /* device memory: cuMemAlloc hands out host memory (calloc), so a test can read and plant
       what a kernel would write (checked mode's record); cuMemsetD32Async and
       cuMemcpyDtoHAsync act on it */
    struct { CUdeviceptr ptr; size_t bytes; } allocs[FAKE_ALLOCS];
    int nallocs, bad_frees, stream_syncs, ctx_syncs, dtoh_copies;
    CUstream last_sync; /* the last cuStreamSynchronize's stream */
    int load_calls[TALON__NUM_IMAGES], bad_images;
    int pushes, pops, capturing_calls, launches, stale_launches, bad_unloads;
    CUcontext last_pushed;
    struct { int image, loaded; } modules[FAKE_MAX];
    int nmodules;
    struct { int kernel, module; } fns[FAKE_MAX];
    int nfns;
    fake_launch last;
    fake_launch log[FAKE_LOG];
} fake;

/* Handles are indices offset so that none is NULL and modules never look like functions. */
#define MODULE_HANDLE(i) ((CUmodule)(uintptr_t)(0x1000 + 16 * (i)))
#define MODULE_INDEX(m) ((int)(((uintptr_t)(m) - 0x1000) / 16))
#define FN_HANDLE(i) ((CUfunction)(uintptr_t)(0x800000 + 16 * (i)))
#define FN_INDEX(f) ((int)(((uintptr_t)(f) - 0x800000) / 16))

static void fake_reset(void) {
    int i;
    for (i = 0; i < fake.nallocs; i++) free((void *)(uintptr_t)fake.allocs[i].ptr); /* leaked */
    memset(&fake, 0, sizeof fake);
    pthread_mutex_init(&fake.lock, NULL);
    fake.major = 9;
    fake.sms = 132; /* H100 SXM / H200 */
    fake.minor = 0;
    fake.driver_version = 12040;
    fake.name = "NVIDIA H100 80GB HBM3";
    fake.current = FAKE_CU;
    fake.load_fail_image = -1;
}

static inline int kernel_index(const char *symbol) {
    int k;
    for (k = 0; k < TALON__NUM_KERNELS; k++)
        if (!strcmp(talon__kernels[k].symbol, symbol)) return k;
    return -1;
}

/* The handle the fake most recently gave out for symbol, NULL if none. */
static inline CUfunction fake_handle_for(const char *symbol) {
    int i, k = kernel_index(symbol);
    for (i = fake.nfns - 1; i >= 0; i--)
        if (fake.fns[i].kernel == k) return FN_HANDLE(i);
    return NULL;
}

/* The one plain launch of a single-kernel op: kernel `symbol` on a grid x 1 x 1, with its table
   row's block and shared memory, on `stream`, no extra, and parameters equal to want. */
static inline void assert_single_launch(const char *symbol, int64_t grid, CUstream stream,
                                        const void *want, size_t param_size) {
    const int k = kernel_index(symbol);
    assert_true(k >= 0);
    assert_int_equal(fake.launches, 1);
    if (fake.last.fn != fake_handle_for(symbol))
        fail_msg("launched %s, expected %s",
                 talon__kernels[fake.fns[FN_INDEX(fake.last.fn)].kernel].symbol, symbol);
    assert_int_equal(fake.last.grid[0], grid);
    assert_int_equal(fake.last.grid[1], 1);
    assert_int_equal(fake.last.grid[2], 1);
    assert_int_equal(fake.last.block[0], talon__kernels[k].block);
    assert_int_equal(fake.last.block[1], 1);
    assert_int_equal(fake.last.block[2], 1);
    assert_int_equal(fake.last.smem, talon__kernels[k].smem);
    assert_ptr_equal(fake.last.stream, stream);
    assert_null(fake.last.extra);
    assert_int_equal(fake.last.param_size, param_size);
    assert_memory_equal(fake.last.params, want, param_size);
}

static int fake_loaded_modules(void) {
    int i, n = 0;
    for (i = 0; i < fake.nmodules; i++) n += fake.modules[i].loaded;
    return n;
}

#define FAKE_ERRORS(X)                                                                         \
    X(CUDA_SUCCESS) X(CUDA_ERROR_INVALID_VALUE) X(CUDA_ERROR_INVALID_HANDLE)                   \
    X(CUDA_ERROR_INVALID_IMAGE) X(CUDA_ERROR_NO_BINARY_FOR_GPU) X(CUDA_ERROR_NOT_FOUND)        \
    X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES) X(CUDA_ERROR_UNKNOWN) X(CUDA_ERROR_OUT_OF_MEMORY)

/* Fault injection (fake.fault_at): counts the call and says whether it is the one to fail. */
static int fake_fault(const char *call) {
    int hit;
    pthread_mutex_lock(&fake.lock);
    hit = ++fake.calls == fake.fault_at;
    if (hit) fake.fault_call = call;
    pthread_mutex_unlock(&fake.lock);
    return hit;
}
#define FAKE_FAULT(call)                                                                       \
    do {                                                                                       \
        if (fake_fault(call)) return fake.fault_result;                                        \
    } while (0)

static CUresult fake_cuGetErrorName(CUresult e, const char **s) {
    switch (e) {
#define FAKE_ERROR_NAME(e) case e: *s = #e; return CUDA_SUCCESS;
        FAKE_ERRORS(FAKE_ERROR_NAME)
#undef FAKE_ERROR_NAME
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult fake_cuGetErrorString(CUresult e, const char **s) {
    (void)e;
    *s = "fake driver error text";
    return CUDA_SUCCESS;
}

static CUresult fake_cuInit(unsigned int flags) {
    (void)flags;
    FAKE_FAULT("cuInit");
    return CUDA_SUCCESS;
}

static CUresult fake_cuDriverGetVersion(int *v) {
    FAKE_FAULT("cuDriverGetVersion");
    *v = fake.driver_version;
    return CUDA_SUCCESS;
}

static CUresult fake_cuCtxGetCurrent(CUcontext *c) {
    FAKE_FAULT("cuCtxGetCurrent");
    *c = fake.current;
    return CUDA_SUCCESS;
}

static CUresult fake_cuCtxPushCurrent(CUcontext c) {
    FAKE_FAULT("cuCtxPushCurrent");
    pthread_mutex_lock(&fake.lock);
    fake.pushes++;
    fake.last_pushed = c;
    pthread_mutex_unlock(&fake.lock);
    return CUDA_SUCCESS;
}

static CUresult fake_cuCtxPopCurrent(CUcontext *c) {
    FAKE_FAULT("cuCtxPopCurrent");
    pthread_mutex_lock(&fake.lock);
    fake.pops++;
    if (c) *c = fake.last_pushed;
    pthread_mutex_unlock(&fake.lock);
    return CUDA_SUCCESS;
}

static CUresult fake_cuCtxGetDevice(CUdevice *d) {
    FAKE_FAULT("cuCtxGetDevice");
    *d = 0;
    return CUDA_SUCCESS;
}

static CUresult fake_cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
    (void)d;
    FAKE_FAULT("cuDeviceGetAttribute");
    if (a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) *v = fake.major;
    else if (a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR) *v = fake.minor;
    else if (a == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) *v = fake.sms;
    else return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static CUresult fake_cuDeviceGetName(char *name, int len, CUdevice d) {
    (void)d;
    FAKE_FAULT("cuDeviceGetName");
    snprintf(name, (size_t)len, "%s", fake.name);
    return CUDA_SUCCESS;
}

static CUresult fake_cuModuleLoadData(CUmodule *m, const void *data) {
    struct timespec nap = {0, 5 * 1000 * 1000}; /* long enough for racing threads to pile up */
    CUresult r = CUDA_SUCCESS;
    int i, image = -1;
    FAKE_FAULT("cuModuleLoadData");
    for (i = 0; i < TALON__NUM_IMAGES; i++)
        if (data == talon__images[i].data) image = i;
    pthread_mutex_lock(&fake.lock);
    if (image < 0) {
        fake.bad_images++;
        r = CUDA_ERROR_INVALID_IMAGE;
    } else if (fake.nmodules == FAKE_MAX) {
        r = CUDA_ERROR_OUT_OF_MEMORY; /* the fake's table is full: raise FAKE_MAX */
    } else {
        fake.load_calls[image]++;
        if (fake.load_result != CUDA_SUCCESS &&
            (fake.load_fail_image < 0 || fake.load_fail_image == image))
            r = fake.load_result;
    }
    if (r == CUDA_SUCCESS) {
        fake.modules[fake.nmodules].image = image;
        fake.modules[fake.nmodules].loaded = 1;
        *m = MODULE_HANDLE(fake.nmodules++);
    }
    pthread_mutex_unlock(&fake.lock);
    if (!fake.quick_loads) nanosleep(&nap, NULL);
    return r;
}

static CUresult fake_cuModuleUnload(CUmodule m) {
    int i = MODULE_INDEX(m);
    CUresult r = CUDA_SUCCESS;
    FAKE_FAULT("cuModuleUnload");
    pthread_mutex_lock(&fake.lock);
    if (i < 0 || i >= fake.nmodules || !fake.modules[i].loaded) {
        fake.bad_unloads++;
        r = CUDA_ERROR_INVALID_HANDLE;
    } else {
        fake.modules[i].loaded = 0;
    }
    pthread_mutex_unlock(&fake.lock);
    return r;
}

static CUresult fake_cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
    int i = MODULE_INDEX(m), k = kernel_index(name);
    CUresult r = CUDA_SUCCESS;
    FAKE_FAULT("cuModuleGetFunction");
    pthread_mutex_lock(&fake.lock);
    if (i < 0 || i >= fake.nmodules || !fake.modules[i].loaded)
        r = CUDA_ERROR_INVALID_HANDLE;
    else if (k < 0 || talon__kernels[k].image != fake.modules[i].image ||
             (fake.getfn_fail_symbol && !strcmp(name, fake.getfn_fail_symbol)))
        r = CUDA_ERROR_NOT_FOUND;
    else if (fake.nfns == FAKE_MAX)
        r = CUDA_ERROR_OUT_OF_MEMORY; /* the fake's table is full: raise FAKE_MAX */
    else {
        fake.fns[fake.nfns].kernel = k;
        fake.fns[fake.nfns].module = i;
        *f = FN_HANDLE(fake.nfns++);
    }
    pthread_mutex_unlock(&fake.lock);
    return r;
}

static CUresult fake_cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
    (void)f; (void)a; (void)v;
    FAKE_FAULT("cuFuncSetAttribute");
    return CUDA_SUCCESS;
}

/* Launching a handle the fake never gave out, or one of an unloaded module, is what a real
   driver punishes with a crash or CUDA_ERROR_INVALID_HANDLE: count it as stale. */
static CUresult fake_launch_record(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                   unsigned bx, unsigned by, unsigned bz, unsigned smem,
                                   CUstream stream, void **params, void **extra, int dependent) {
    int i = FN_INDEX(f);
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&fake.lock);
    if (i < 0 || i >= fake.nfns || !fake.modules[fake.fns[i].module].loaded || !params) {
        fake.stale_launches++;
        r = CUDA_ERROR_INVALID_HANDLE;
    } else if (fake.launch_result != CUDA_SUCCESS) {
        r = fake.launch_result;
    } else {
        fake_launch *l = &fake.last;
        memset(l, 0, sizeof *l);
        l->fn = f;
        l->grid[0] = gx; l->grid[1] = gy; l->grid[2] = gz;
        l->block[0] = bx; l->block[1] = by; l->block[2] = bz;
        l->smem = smem;
        l->stream = stream;
        l->extra = extra;
        l->dependent = dependent;
        l->param_size = talon__kernels[fake.fns[i].kernel].param_size;
        if ((size_t)l->param_size > sizeof l->params) l->param_size = -1; /* fails the check */
        else memcpy(l->params, params[0], (size_t)l->param_size);
        if (fake.launches < FAKE_LOG) fake.log[fake.launches] = *l;
        fake.launches++;
    }
    pthread_mutex_unlock(&fake.lock);
    return r;
}

static CUresult fake_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                    unsigned bx, unsigned by, unsigned bz, unsigned smem,
                                    CUstream stream, void **params, void **extra) {
    FAKE_FAULT("cuLaunchKernel");
    return fake_launch_record(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra, 0);
}

/* Only the attribute talon uses is accepted; anything else in the config is an error. */
static CUresult fake_cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params,
                                      void **extra) {
    FAKE_FAULT("cuLaunchKernelEx");
    if (!c || c->numAttrs != 1 || !c->attrs ||
        c->attrs[0].id != CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION ||
        c->attrs[0].value.programmaticStreamSerializationAllowed != 1)
        return CUDA_ERROR_INVALID_VALUE;
    return fake_launch_record(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX,
                              c->blockDimY, c->blockDimZ, c->sharedMemBytes, c->hStream, params,
                              extra, 1);
}

static CUresult fake_cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status) {
    (void)s;
    FAKE_FAULT("cuStreamIsCapturing");
    pthread_mutex_lock(&fake.lock);
    fake.capturing_calls++;
    *status = fake.capture;
    pthread_mutex_unlock(&fake.lock);
    return CUDA_SUCCESS;
}

/* The live allocation holding [p, p + n), -1 if none; caller holds fake.lock. */
static int fake_alloc_of(CUdeviceptr p, size_t n) {
    int i;
    for (i = 0; i < fake.nallocs; i++)
        if (p >= fake.allocs[i].ptr && p - fake.allocs[i].ptr + n <= fake.allocs[i].bytes) return i;
    return -1;
}

static int fake_live_allocs(void) { return fake.nallocs; }

/* Records the last memset (and whether it came before any launch); fills it when it lands
   in fake device memory (elsewhere the addresses are made up). */
static CUresult fake_cuMemsetD32Async(CUdeviceptr dst, unsigned value, size_t n, CUstream s) {
    size_t i;
    FAKE_FAULT("cuMemsetD32Async");
    pthread_mutex_lock(&fake.lock);
    fake.memsets++;
    fake.fill.dst = dst; fake.fill.value = value; fake.fill.n = n; fake.fill.stream = s;
    fake.fill.before_launch = fake.launches == 0;
    if (fake_alloc_of(dst, 4 * n) >= 0)
        for (i = 0; i < n; i++) memcpy((char *)(uintptr_t)dst + 4 * i, &value, 4);
    pthread_mutex_unlock(&fake.lock);
    return CUDA_SUCCESS;
}

static CUresult fake_cuMemAlloc(CUdeviceptr *p, size_t bytes) {
    void *mem;
    CUresult r = CUDA_SUCCESS;
    FAKE_FAULT("cuMemAlloc");
    pthread_mutex_lock(&fake.lock);
    if (fake.nallocs == FAKE_ALLOCS || !(mem = calloc(1, bytes ? bytes : 1))) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        memset(mem, 0xa5, bytes); /* cuMemAlloc does not zero */
        *p = (CUdeviceptr)(uintptr_t)mem;
        fake.allocs[fake.nallocs].ptr = *p;
        fake.allocs[fake.nallocs++].bytes = bytes;
    }
    pthread_mutex_unlock(&fake.lock);
    return r;
}

static CUresult fake_cuMemFree(CUdeviceptr p) {
    int i;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    FAKE_FAULT("cuMemFree");
    pthread_mutex_lock(&fake.lock);
    for (i = 0; i < fake.nallocs; i++)
        if (fake.allocs[i].ptr == p) {
            free((void *)(uintptr_t)p);
            fake.allocs[i] = fake.allocs[--fake.nallocs];
            r = CUDA_SUCCESS;
            break;
        }
    if (r != CUDA_SUCCESS) fake.bad_frees++;
    pthread_mutex_unlock(&fake.lock);
    return r;
}

static CUresult fake_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes, CUstream s) {
    CUresult r = CUDA_SUCCESS;
    (void)s;
    FAKE_FAULT("cuMemcpyDtoHAsync");
    pthread_mutex_lock(&fake.lock);
    fake.dtoh_copies++;
    if (fake_alloc_of(src, bytes) < 0) r = CUDA_ERROR_INVALID_VALUE;
    else memcpy(dst, (const void *)(uintptr_t)src, bytes);
    pthread_mutex_unlock(&fake.lock);
    return r;
}

static CUresult fake_cuStreamSynchronize(CUstream s) {
    FAKE_FAULT("cuStreamSynchronize");
    pthread_mutex_lock(&fake.lock);
    fake.stream_syncs++;
    fake.last_sync = s;
    pthread_mutex_unlock(&fake.lock);
    return CUDA_SUCCESS;
}

static CUresult fake_cuCtxSynchronize(void) {
    FAKE_FAULT("cuCtxSynchronize");
    pthread_mutex_lock(&fake.lock);
    fake.ctx_syncs++;
    pthread_mutex_unlock(&fake.lock);
    return CUDA_SUCCESS;
}

/* Records the last encode; fails with fake.encode_result. The map's first 8 bytes get the
   address so a test can see which map a kernel parameter holds. */
static CUresult fake_cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType type,
                                            cuuint32_t rank, void *addr, const cuuint64_t *dims,
                                            const cuuint64_t *strides, const cuuint32_t *box,
                                            const cuuint32_t *elem_strides,
                                            CUtensorMapInterleave interleave,
                                            CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                            CUtensorMapFloatOOBfill oob) {
    cuuint32_t i;
    FAKE_FAULT("cuTensorMapEncodeTiled");
    pthread_mutex_lock(&fake.lock);
    fake.encodes++;
    fake.enc.type = type; fake.enc.rank = rank; fake.enc.addr = addr;
    for (i = 0; i < rank && i < 5; i++) {
        fake.enc.dims[i] = dims[i];
        fake.enc.box[i] = box[i];
        fake.enc.elem_strides[i] = elem_strides[i];
        if (i + 1 < rank) fake.enc.strides[i] = strides[i];
    }
    fake.enc.interleave = interleave; fake.enc.swizzle = swizzle; fake.enc.l2 = l2;
    fake.enc.oob = oob;
    if (fake.encodes <= FAKE_ENC_LOG) fake.enc_log[fake.encodes - 1] = fake.enc;
    pthread_mutex_unlock(&fake.lock);
    if (fake.encode_result != CUDA_SUCCESS) return fake.encode_result;
    memset(map, 0, sizeof *map);
    memcpy(map, &addr, sizeof addr);
    return CUDA_SUCCESS;
}

/* Built from TALON__DRIVER_FUNCS so a new driver entry point fails to compile here until the
   fake implements it. */
static const talon__driver fake_driver = {
    .loaded = 1,
#define FAKE_ENTRY(name, version, args) .name = fake_##name,
    TALON__DRIVER_FUNCS(FAKE_ENTRY)
#undef FAKE_ENTRY
};

/* ================================================================ fixtures and helpers */
static talon_ctx *g_ctx; /* fresh per test, modules not loaded */

static int setup(void **state) {
    (void)state;
    fake_reset();
    talon__driver_fake = &fake_driver;
    talon__error_buf[0] = '\0';
    return talon_ctx_create(&g_ctx, NULL) == TALON_SUCCESS ? 0 : -1;
}

/* Every path must leave the driver's context stack and module table as it found them. */
static int teardown(void **state) {
    (void)state;
    talon_ctx_destroy(g_ctx);
    g_ctx = NULL;
    talon__driver_fake = &fake_driver;
    if (fake.pushes != fake.pops || fake_loaded_modules() || fake.bad_unloads ||
        fake.bad_images || fake.stale_launches || fake_live_allocs() || fake.bad_frees) {
        print_error("teardown: pushes %d pops %d, modules still loaded %d, bad unloads %d, "
                    "bad images %d, stale launches %d, device allocations left %d, bad frees "
                    "%d\n",
                    fake.pushes, fake.pops, fake_loaded_modules(), fake.bad_unloads,
                    fake.bad_images, fake.stale_launches, fake_live_allocs(), fake.bad_frees);
        return -1;
    }
    return 0;
}

static int is_ident(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* tok occurs in s as a whole word, so "out" does not match inside "out_stride". */
static int has_token(const char *s, const char *tok) {
    size_t n = strlen(tok);
    const char *p;
    for (p = strstr(s, tok); p; p = strstr(p + 1, tok))
        if ((p == s || !is_ident(p[-1]) || !is_ident(tok[0])) && !is_ident(p[n])) return 1;
    return 0;
}

#define assert_token(s, tok)                                                                   \
    do {                                                                                       \
        if (!has_token((s), (tok))) fail_msg("\"%s\" not in message \"%s\"", (tok), (s));     \
    } while (0)
#define assert_contains(s, sub)                                                                \
    do {                                                                                       \
        if (!strstr((s), (sub))) fail_msg("\"%s\" not in message \"%s\"", (sub), (s));       \
    } while (0)

/* What every rejected call must show: INVALID_ARGUMENT, nothing loaded or launched, and a
   message "op: ..." that names the field and the value as whole words. */
static inline void assert_rejected(talon_status s, const char *op, const char *field,
                                   const char *value) {
    const char *msg = talon_last_error();
    int i;
    assert_int_equal(s, TALON_ERROR_INVALID_ARGUMENT);
    assert_int_equal(fake.launches, 0);
    for (i = 0; i < TALON__NUM_IMAGES; i++) assert_int_equal(fake.load_calls[i], 0);
    if (strncmp(msg, op, strlen(op)) || msg[strlen(op)] != ':')
        fail_msg("message \"%s\" does not start with \"%s:\"", msg, op);
    assert_token(msg, field);
    assert_token(msg, value);
}

/* ================================================================ table-driven tests */
/* One field edit of an args struct, for tables of invalid or launch cases: the field by
   offset, how to write it, the value. SET_INT (alias SET_ENUM) writes an int (enums, flags),
   SET_F32 a float. */
typedef enum { SET_NONE, SET_PTR, SET_I64, SET_INT, SET_F32, SET_ENUM = SET_INT } set_kind;
typedef struct field_set { set_kind kind; size_t off; int64_t i; double f; } field_set;
#define SET(T, f, k, v) {SET_##k, offsetof(T, f), (int64_t)(v), (double)(v)}

/* Applies up to n edits (fewer when a SET_NONE ends the list) to the struct at args. */
static inline void apply_sets(void *args, const field_set *sets, int n) {
    int i;
    for (i = 0; i < n && sets[i].kind != SET_NONE; i++) {
        char *p = (char *)args + sets[i].off;
        CUdeviceptr ptr = (CUdeviceptr)sets[i].i;
        int e = (int)sets[i].i;
        float f = (float)sets[i].f;
        if (sets[i].kind == SET_PTR) memcpy(p, &ptr, sizeof ptr);
        else if (sets[i].kind == SET_I64) memcpy(p, &sets[i].i, sizeof sets[i].i);
        else if (sets[i].kind == SET_INT) memcpy(p, &e, sizeof e);
        else memcpy(p, &f, sizeof f);
    }
}

/* Every test of a program runs with the fixtures above (fresh fake driver and ctx); row
   becomes the test's state. test_run runs what test_add registered. */
#define TEST_MAX 512
static struct CMUnitTest test_table[TEST_MAX];
static size_t test_count;

static inline void test_add(const char *name, CMUnitTestFunction fn, const void *row) {
    if (test_count == TEST_MAX) abort(); /* a test program bug: raise TEST_MAX */
    test_table[test_count].name = name;
    test_table[test_count].test_func = fn;
    test_table[test_count].setup_func = setup;
    test_table[test_count].teardown_func = teardown;
    test_table[test_count].initial_state = (void *)(uintptr_t)row; /* rows are read-only */
    test_count++;
}

#define test_run(group) _cmocka_run_group_tests(group, test_table, test_count, NULL, NULL)

#endif
