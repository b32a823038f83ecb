/* talon/impl/core.h - the dispatcher's core: driver table, errors, bundle and kernel table,
   context and launch. Part of talon.h's implementation (TALON_IMPLEMENTATION); not a public
   header. */
#ifndef TALON_IMPL_CORE_H
#define TALON_IMPL_CORE_H

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "talon_cubins.h" /* generated: embedded images and build facts */
#include "../kernels/all.def"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__cplusplus)
#define TALON__THREAD_LOCAL thread_local
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define TALON__THREAD_LOCAL _Thread_local
#else
#define TALON__THREAD_LOCAL __thread
#endif

/* ---------------------------------------------------------------- driver table */
/* Every driver entry point talon uses, resolved at run time, each at the ABI version whose
   signature is written here (cudaTypedefs.h names it PFN_<name>_v<version>;
   tests/core/driver_abi_check.c checks they agree at compile time). Asking for the header's CUDA_VERSION instead would hand back newer
   variants with other signatures: CUDA 13's cuCtxGetDevice takes a context too. Tests replace
   the table with a fake through talon__driver_fake; `loaded` 0 means "no driver". */
#define TALON__DRIVER_FUNCS(X)                                                                 \
    X(cuInit, 2000, (unsigned int flags))                                                      \
    X(cuDriverGetVersion, 2020, (int *version))                                                \
    X(cuCtxGetCurrent, 4000, (CUcontext * ctx))                                                \
    X(cuCtxPushCurrent, 4000, (CUcontext ctx))                                                 \
    X(cuCtxPopCurrent, 4000, (CUcontext * ctx))                                                \
    X(cuCtxGetDevice, 2000, (CUdevice * dev))                                                  \
    X(cuDeviceGetAttribute, 2000, (int *value, CUdevice_attribute attr, CUdevice dev))         \
    X(cuDeviceGetName, 2000, (char *name, int len, CUdevice dev))                              \
    X(cuModuleLoadData, 2000, (CUmodule * module, const void *image))                          \
    X(cuModuleUnload, 2000, (CUmodule module))                                                 \
    X(cuModuleGetFunction, 2000, (CUfunction * fn, CUmodule module, const char *name))         \
    X(cuFuncSetAttribute, 9000, (CUfunction fn, CUfunction_attribute attr, int value))         \
    X(cuLaunchKernel, 4000, (CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, \
                             unsigned by, unsigned bz, unsigned smem, CUstream stream,         \
                             void **params, void **extra))                                     \
    X(cuLaunchKernelEx, 11060, (const CUlaunchConfig *config, CUfunction fn, void **params,   \
                                void **extra))                                                 \
    X(cuStreamIsCapturing, 10000, (CUstream stream, CUstreamCaptureStatus * status))           \
    X(cuMemsetD32Async, 3020, (CUdeviceptr dst, unsigned int value, size_t n, CUstream stream)) \
    X(cuMemAlloc, 3020, (CUdeviceptr * dptr, size_t bytes))                                    \
    X(cuMemFree, 3020, (CUdeviceptr dptr))                                                     \
    X(cuMemcpyDtoHAsync, 3020, (void *dst, CUdeviceptr src, size_t bytes, CUstream stream))    \
    X(cuStreamSynchronize, 2000, (CUstream stream))                                            \
    X(cuCtxSynchronize, 2000, (void))                                                          \
    X(cuGetErrorName, 6000, (CUresult error, const char **str))                                \
    X(cuGetErrorString, 6000, (CUresult error, const char **str))                              \
    X(cuTensorMapEncodeTiled, 12000,                                                           \
      (CUtensorMap * map, CUtensorMapDataType type, cuuint32_t rank, void *addr,               \
       const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,               \
       const cuuint32_t *elem_strides, CUtensorMapInterleave interleave,                       \
       CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob))

typedef struct talon__driver {
    int loaded;
#define TALON__DRIVER_FIELD(name, version, args) CUresult (*name) args;
    TALON__DRIVER_FUNCS(TALON__DRIVER_FIELD)
#undef TALON__DRIVER_FIELD
} talon__driver;

static const talon__driver *talon__driver_fake; /* test seam: used instead of libcuda */
static talon__driver talon__driver_real;
static pthread_once_t talon__driver_once = PTHREAD_ONCE_INIT;

/* Opens libname and fills *d through cuGetProcAddress; d->loaded stays 0 on any failure. */
static void talon__driver_open(const char *libname, talon__driver *d) {
    typedef CUresult (*get_proc_fn)(const char *, void **, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult *);
    get_proc_fn get_proc;
    void *lib = dlopen(libname, RTLD_NOW | RTLD_LOCAL);
    memset(d, 0, sizeof *d);
    if (!lib) return;
    *(void **)(&get_proc) = dlsym(lib, "cuGetProcAddress_v2");
    if (!get_proc) goto fail;
#define TALON__DRIVER_RESOLVE(name, version, args)                                             \
    if (get_proc(#name, (void **)&d->name, version, CU_GET_PROC_ADDRESS_DEFAULT, NULL) !=      \
            CUDA_SUCCESS || !d->name)                                                          \
        goto fail;
    TALON__DRIVER_FUNCS(TALON__DRIVER_RESOLVE)
#undef TALON__DRIVER_RESOLVE
    if (d->cuInit(0) == CUDA_SUCCESS) {
        d->loaded = 1;
        return;
    }
fail:
    dlclose(lib);
    memset(d, 0, sizeof *d);
}

static void talon__driver_load_once(void) { talon__driver_open("libcuda.so.1", &talon__driver_real); }

static const talon__driver *talon__driver_get(void) {
    const talon__driver *d = talon__driver_fake;
    if (!d) {
        pthread_once(&talon__driver_once, talon__driver_load_once);
        d = &talon__driver_real;
    }
    return d->loaded ? d : NULL;
}

/* ---------------------------------------------------------------- errors */
static TALON__THREAD_LOCAL char talon__error_buf[512];

const char *talon_status_string(talon_status status) {
    switch (status) {
#define TALON__STATUS_CASE(name, value, text) case name: return text;
        TALON_STATUS_LIST(TALON__STATUS_CASE)
#undef TALON__STATUS_CASE
    default: return "unknown status";
    }
}

const char *talon_last_error(void) { return talon__error_buf; }

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static talon_status talon__fail(talon_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(talon__error_buf, sizeof talon__error_buf, fmt, ap);
    va_end(ap);
    return status;
}

/* Fails with the driver's own name and text for r, plus advice for the errors users hit. */
static talon_status talon__fail_cu(const talon__driver *d, talon_status status, CUresult r,
                                   const char *what) {
    const char *name = "?", *text = "?", *advice = "";
    int version = 0;
    if (d->cuGetErrorName(r, &name) != CUDA_SUCCESS) name = "unknown CUresult";
    if (d->cuGetErrorString(r, &text) != CUDA_SUCCESS) text = "";
    if (r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_INVALID_IMAGE ||
        r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION) {
        d->cuDriverGetVersion(&version);
        advice = "; the cubins are sm_90a built with CUDA " TALON__BUNDLE_CUDA
                 ": use an H100/H200 and a driver that supports that CUDA version";
    }
    if (version)
        return talon__fail(status, "%s failed: %s (%d): %s%s (this driver supports CUDA %d.%d)",
                           what, name, (int)r, text, advice, version / 1000, version % 1000 / 10);
    return talon__fail(status, "%s failed: %s (%d): %s%s", what, name, (int)r, text, advice);
}

/* ---------------------------------------------------------------- bundle and kernel table */
/* Built from the families' rows (include/talon/kernels/<family>.def, through all.def). */
typedef char talon__dtype_values_agree[TALON__BF16 == TALON_DTYPE_BF16 && TALON__F16 == TALON_DTYPE_F16 &&
                                       TALON__F32 == TALON_DTYPE_F32 && TALON__I32 == TALON_DTYPE_I32 &&
                                       TALON__FP8_E4M3 == TALON_DTYPE_FP8_E4M3 &&
                                       TALON__ROUTER_SOFTMAX == TALON_ROUTER_SOFTMAX ? 1 : -1];

enum {
#define TALON__IMAGE_ENUM(img) TALON__IMG_##img,
    TALON__IMAGES(TALON__IMAGE_ENUM)
#undef TALON__IMAGE_ENUM
    TALON__NUM_IMAGES
};

#define TALON__KERNEL_ENUM(sym, img, body, targs, block, minb, cluster, smem, P) TALON__K_##sym,
#define TALON__KERNEL_ENUM_OF(img) TALON__KERNELS_##img(TALON__KERNEL_ENUM)
enum { TALON__IMAGES(TALON__KERNEL_ENUM_OF) TALON__NUM_KERNELS };
#undef TALON__KERNEL_ENUM_OF
#undef TALON__KERNEL_ENUM

#define TALON__BODY_ENUM(body) TALON__B_##body,
#define TALON__BODY_ENUM_OF(img) TALON__BODIES_##img(TALON__BODY_ENUM)
typedef enum talon__body { TALON__IMAGES(TALON__BODY_ENUM_OF) TALON__NUM_BODIES } talon__body;
#undef TALON__BODY_ENUM_OF
#undef TALON__BODY_ENUM

#define TALON__BODY_NAME(body) #body,
#define TALON__BODY_NAME_OF(img) TALON__BODIES_##img(TALON__BODY_NAME)
static const char *const talon__body_names[TALON__NUM_BODIES] = {TALON__IMAGES(TALON__BODY_NAME_OF)};
#undef TALON__BODY_NAME_OF
#undef TALON__BODY_NAME

/* What the host needs of a .def row (min_blocks and cluster are compiled into the kernel);
   targs are the body's template arguments, zero-padded. */
typedef struct talon__kernel {
    const char *symbol;
    talon__body body;
    int targs[TALON__TARGS_MAX];
    int image, block, smem, param_size;
} talon__kernel;

#define TALON__KERNEL_ROW(sym, img, body, targs, block, minb, cluster, smem, P)                \
    {#sym, TALON__B_##body, {TALON__UNPAREN targs}, TALON__IMG_##img, block, smem, (int)sizeof(P)},
#define TALON__KERNEL_ROWS_OF(img) TALON__KERNELS_##img(TALON__KERNEL_ROW)
static const talon__kernel talon__kernels[TALON__NUM_KERNELS] = {TALON__IMAGES(TALON__KERNEL_ROWS_OF)};
#undef TALON__KERNEL_ROWS_OF
#undef TALON__KERNEL_ROW

static const struct talon__image { const char *name; const unsigned char *data; size_t size; }
    talon__images[TALON__NUM_IMAGES] = {
/* each image array ends with its string literal's NUL (tools/embed.sh) */
#define TALON__IMAGE_ROW(img) {#img, talon__image_##img, sizeof talon__image_##img - 1},
        TALON__IMAGES(TALON__IMAGE_ROW)
#undef TALON__IMAGE_ROW
};

#define TALON__KERNEL_NAME(sym, img, body, targs, block, minb, cluster, smem, P) #sym,
#define TALON__KERNEL_NAMES_OF(img) TALON__KERNELS_##img(TALON__KERNEL_NAME)
static const char *const talon__kernel_names[TALON__NUM_KERNELS] = {TALON__IMAGES(TALON__KERNEL_NAMES_OF)};
#undef TALON__KERNEL_NAMES_OF
#undef TALON__KERNEL_NAME

int talon_version(void) {
    return TALON_VERSION_MAJOR * 10000 + TALON_VERSION_MINOR * 100 + TALON_VERSION_PATCH;
}

const talon_bundle_info *talon_bundle_info_get(void) {
    static const talon_bundle_info info = {
        TALON_VERSION_STRING, TALON__BUNDLE_COMMIT, TALON__BUNDLE_NVCC, TALON__BUNDLE_ARCH,
        TALON__NUM_IMAGES,    TALON__NUM_KERNELS,   talon__kernel_names};
    return &info;
}

/* ---------------------------------------------------------------- context */
struct talon_ctx {
    const talon__driver *drv;
    CUcontext cu;
    int sms;               /* the device's SM count: the plans' fact */
    CUdeviceptr check;     /* TALON_CTX_CHECKED: the talon__check_record; else 0 */
    pthread_mutex_t check_lock; /* one talon_ctx_check at a time reads and clears the record */
    pthread_mutex_t lock;
    CUmodule modules[TALON__NUM_IMAGES];     /* written under lock */
    CUfunction functions[TALON__NUM_KERNELS]; /* published with release, read with acquire */
};

/* Loads one image and resolves all its kernels, for the function `op` (named first in every
   message); caller holds ctx->lock. Nothing is published until every kernel resolved: the
   lock-free fast path in talon__launch would otherwise launch a handle into a module that a
   later failure unloaded. */
static talon_status talon__load_image(talon_ctx *ctx, int image, const char *op) {
    const talon__driver *d = ctx->drv;
    CUfunction fns[TALON__NUM_KERNELS] = {0};
    CUmodule module;
    CUcontext prev;
    CUresult r;
    int k;
    char what[192];
    if (ctx->modules[image]) return TALON_SUCCESS;
    if ((r = d->cuCtxPushCurrent(ctx->cu)) != CUDA_SUCCESS) {
        snprintf(what, sizeof what, "%s: cuCtxPushCurrent", op);
        return talon__fail_cu(d, TALON_ERROR_DRIVER, r, what);
    }
    r = d->cuModuleLoadData(&module, talon__images[image].data);
    if (r != CUDA_SUCCESS) {
        d->cuCtxPopCurrent(&prev);
        snprintf(what, sizeof what, "%s: cuModuleLoadData(image \"%s\", %zu bytes)", op,
                 talon__images[image].name, talon__images[image].size);
        return talon__fail_cu(d, TALON_ERROR_MODULE_LOAD, r, what);
    }
    for (k = 0; k < TALON__NUM_KERNELS; k++) {
        const talon__kernel *kd = &talon__kernels[k];
        if (kd->image != image) continue;
        snprintf(what, sizeof what, "%s: cuModuleGetFunction(\"%s\")", op, kd->symbol);
        r = d->cuModuleGetFunction(&fns[k], module, kd->symbol);
        if (r == CUDA_SUCCESS && kd->smem > 48 * 1024) {
            snprintf(what, sizeof what, "%s: cuFuncSetAttribute(\"%s\")", op, kd->symbol);
            r = d->cuFuncSetAttribute(fns[k], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      kd->smem);
        }
        if (r != CUDA_SUCCESS) {
            d->cuModuleUnload(module);
            d->cuCtxPopCurrent(&prev);
            return talon__fail_cu(d, TALON_ERROR_MODULE_LOAD, r, what);
        }
    }
    if ((r = d->cuCtxPopCurrent(&prev)) != CUDA_SUCCESS) { /* still current: undo the load */
        d->cuModuleUnload(module);
        snprintf(what, sizeof what, "%s: cuCtxPopCurrent (after loading image \"%s\")", op,
                 talon__images[image].name);
        return talon__fail_cu(d, TALON_ERROR_DRIVER, r, what);
    }
    for (k = 0; k < TALON__NUM_KERNELS; k++)
        if (talon__kernels[k].image == image)
            __atomic_store_n(&ctx->functions[k], fns[k], __ATOMIC_RELEASE);
    ctx->modules[image] = module;
    return TALON_SUCCESS;
}

/* Every image, for the function `op` (talon_ctx_preload, or talon_ctx_create's preload). */
static talon_status talon__preload(talon_ctx *ctx, const char *op) {
    talon_status s = TALON_SUCCESS;
    int i;
    pthread_mutex_lock(&ctx->lock);
    for (i = 0; i < TALON__NUM_IMAGES && s == TALON_SUCCESS; i++)
        s = talon__load_image(ctx, i, op);
    pthread_mutex_unlock(&ctx->lock);
    return s;
}

talon_status talon_ctx_preload(talon_ctx *ctx) {
    if (!ctx) return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "talon_ctx_preload: ctx is NULL");
    return talon__preload(ctx, "talon_ctx_preload");
}

/* Checked mode: the record, allocated and zeroed (on the legacy stream, waited for) while
   ctx->cu is current; on failure ctx->check holds whatever needs freeing. */
static talon_status talon__check_create(talon_ctx *ctx) {
    const talon__driver *d = ctx->drv;
    const char *call = "talon_ctx_create: cuMemAlloc(checked-mode record)";
    CUcontext prev;
    CUresult r, r2;
    typedef char talon__check_record_words[sizeof(talon__check_record) ==
                                                   4 * TALON__CHECK_RECORD_WORDS ? 1 : -1];
    if ((r = d->cuCtxPushCurrent(ctx->cu)) != CUDA_SUCCESS)
        return talon__fail_cu(d, TALON_ERROR_DRIVER, r, "talon_ctx_create: cuCtxPushCurrent");
    r = d->cuMemAlloc(&ctx->check, sizeof(talon__check_record));
    if (r == CUDA_SUCCESS) {
        call = "talon_ctx_create: cuMemsetD32Async(checked-mode record)";
        r = d->cuMemsetD32Async(ctx->check, 0, TALON__CHECK_RECORD_WORDS, 0);
    }
    if (r == CUDA_SUCCESS) {
        call = "talon_ctx_create: cuStreamSynchronize(checked-mode record)";
        r = d->cuStreamSynchronize(0);
    }
    if ((r2 = d->cuCtxPopCurrent(&prev)) != CUDA_SUCCESS && r == CUDA_SUCCESS) {
        r = r2;
        call = "talon_ctx_create: cuCtxPopCurrent";
    }
    if (r != CUDA_SUCCESS) return talon__fail_cu(d, TALON_ERROR_DRIVER, r, call);
    (void)sizeof(talon__check_record_words);
    return TALON_SUCCESS;
}

/* The checked-mode parameter of kernel k for a launch on ctx: zero unless ctx is checked (so an
   unchecked launch passes the params it always did). */
static void talon__check_set(const talon_ctx *ctx, talon__check *c, int k) {
    memset(c, 0, sizeof *c);
    if (!ctx->check) return;
    c->record = ctx->check;
    c->kernel = k;
}

talon_status talon_ctx_create(talon_ctx **out, const talon_ctx_options *options) {
    static const talon_ctx_options defaults = {NULL, 0};
    const talon_ctx_options *o = options ? options : &defaults;
    const talon__driver *d;
    talon_ctx *ctx;
    CUcontext cu = o->context, prev;
    CUdevice dev;
    CUresult r, r2;
    const char *call;
    int major = 0, minor = 0, sms = 0;
    char name[128];
    talon_status s;

    if (!out) return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "talon_ctx_create: out is NULL");
    *out = NULL;
    if (o->flags & ~(unsigned)(TALON_CTX_PRELOAD | TALON_CTX_CHECKED))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "talon_ctx_create: options->flags = 0x%x has unknown bits", o->flags);
    if (!(d = talon__driver_get()))
        return talon__fail(TALON_ERROR_NO_DRIVER,
                           "talon_ctx_create: could not load libcuda.so.1 and cuInit it; install "
                           "an NVIDIA driver (R580+ for CUDA 13 cubins)");
    if (!cu && (r = d->cuCtxGetCurrent(&cu)) != CUDA_SUCCESS)
        return talon__fail_cu(d, TALON_ERROR_DRIVER, r, "talon_ctx_create: cuCtxGetCurrent");
    if (!cu)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "talon_ctx_create: options->context is NULL and no CUDA context is "
                           "current on this thread (cuCtxSetCurrent or cuDevicePrimaryCtxRetain)");
    if ((r = d->cuCtxPushCurrent(cu)) != CUDA_SUCCESS)
        return talon__fail_cu(d, TALON_ERROR_DRIVER, r, "talon_ctx_create: cuCtxPushCurrent");
    /* the device's facts, each call named in the message if it fails */
    call = "talon_ctx_create: cuCtxGetDevice";
    r = d->cuCtxGetDevice(&dev);
    if (r == CUDA_SUCCESS) {
        call = "talon_ctx_create: cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)";
        r = d->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    }
    if (r == CUDA_SUCCESS) {
        call = "talon_ctx_create: cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)";
        r = d->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    }
    if (r == CUDA_SUCCESS) {
        call = "talon_ctx_create: cuDeviceGetName";
        r = d->cuDeviceGetName(name, (int)sizeof name, dev);
    }
    if (r == CUDA_SUCCESS) {
        call = "talon_ctx_create: cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)";
        r = d->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    }
    /* the caller's context stack as it was: a failed pop is reported, not ignored */
    if ((r2 = d->cuCtxPopCurrent(&prev)) != CUDA_SUCCESS && r == CUDA_SUCCESS) {
        r = r2;
        call = "talon_ctx_create: cuCtxPopCurrent";
    }
    if (r != CUDA_SUCCESS) return talon__fail_cu(d, TALON_ERROR_DRIVER, r, call);
    if (major != 9 || minor != 0)
        return talon__fail(TALON_ERROR_UNSUPPORTED_DEVICE,
                           "talon_ctx_create: device %d \"%s\" is sm_%d%d; talon's cubins are "
                           "sm_90a and run only on sm_90 (H100/H200)",
                           (int)dev, name, major, minor);
    if (sms < 1)
        return talon__fail(TALON_ERROR_DRIVER,
                           "talon_ctx_create: device %d \"%s\" reports %d multiprocessors",
                           (int)dev, name, sms);
    if (!(ctx = (talon_ctx *)calloc(1, sizeof *ctx)))
        return talon__fail(TALON_ERROR_OUT_OF_MEMORY, "talon_ctx_create: calloc(%zu) failed",
                           sizeof *ctx);
    ctx->drv = d;
    ctx->cu = cu;
    ctx->sms = sms;
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_mutex_init(&ctx->check_lock, NULL);
    if ((o->flags & TALON_CTX_CHECKED) && (s = talon__check_create(ctx)) != TALON_SUCCESS) {
        talon_ctx_destroy(ctx);
        return s;
    }
    if ((o->flags & TALON_CTX_PRELOAD) &&
        (s = talon__preload(ctx, "talon_ctx_create")) != TALON_SUCCESS) {
        talon_ctx_destroy(ctx);
        return s;
    }
    *out = ctx;
    return TALON_SUCCESS;
}

void talon_ctx_destroy(talon_ctx *ctx) {
    CUcontext prev;
    int i;
    if (!ctx) return;
    if (ctx->drv->cuCtxPushCurrent(ctx->cu) == CUDA_SUCCESS) {
        for (i = 0; i < TALON__NUM_IMAGES; i++)
            if (ctx->modules[i]) ctx->drv->cuModuleUnload(ctx->modules[i]);
        if (ctx->check) ctx->drv->cuMemFree(ctx->check);
        ctx->drv->cuCtxPopCurrent(&prev);
    }
    pthread_mutex_destroy(&ctx->check_lock);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

/* ---------------------------------------------------------------- checked mode */
static const struct talon__check_site {
    const char *op, *what, *rule;
} talon__check_sites[TALON__CHECK_NUM_SITES] = {
#define TALON__CHECK_SITE_ROW(site, op, what, rule) {op, what, rule},
    TALON__CHECK_SITES(TALON__CHECK_SITE_ROW)
#undef TALON__CHECK_SITE_ROW
};

/* Reads the record after `stream`'s work (0: every stream's) into *rec and zeroes it when it
   holds a violation; the caller holds check_lock and has ctx->cu current. One still being
   written (claimed, not done: a kernel of another stream is running) is waited for. */
static talon_status talon__check_read(talon_ctx *ctx, CUstream stream, talon__check_record *rec) {
    static const char op[] = "talon_ctx_check";
    const talon__driver *d = ctx->drv;
    CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r;
    int pass;
    if (stream) {
        if ((r = d->cuStreamIsCapturing(stream, &cap)) != CUDA_SUCCESS)
            return talon__fail_cu(d, TALON_ERROR_DRIVER, r, "talon_ctx_check: cuStreamIsCapturing");
        if (cap != CU_STREAM_CAPTURE_STATUS_NONE)
            return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: stream %p is capturing; "
                               "talon_ctx_check synchronises and is not legal during capture",
                               op, (void *)stream);
    }
    for (pass = 0; pass < 2; pass++) {
        if ((!stream || pass) && (r = d->cuCtxSynchronize()) != CUDA_SUCCESS)
            return talon__fail_cu(d, TALON_ERROR_DRIVER, r, "talon_ctx_check: cuCtxSynchronize");
        if ((r = d->cuMemcpyDtoHAsync(rec, ctx->check, sizeof *rec, stream)) != CUDA_SUCCESS)
            return talon__fail_cu(d, TALON_ERROR_DRIVER, r,
                                  "talon_ctx_check: cuMemcpyDtoHAsync(checked-mode record)");
        if ((r = d->cuStreamSynchronize(stream)) != CUDA_SUCCESS)
            return talon__fail_cu(d, TALON_ERROR_DRIVER, r, "talon_ctx_check: cuStreamSynchronize");
        if (!rec->claim || rec->done) break;
    }
    if (!rec->claim) return TALON_SUCCESS;
    if ((r = d->cuMemsetD32Async(ctx->check, 0, TALON__CHECK_RECORD_WORDS, stream)) != CUDA_SUCCESS)
        return talon__fail_cu(d, TALON_ERROR_DRIVER, r,
                              "talon_ctx_check: cuMemsetD32Async(checked-mode record)");
    if ((r = d->cuStreamSynchronize(stream)) != CUDA_SUCCESS)
        return talon__fail_cu(d, TALON_ERROR_DRIVER, r, "talon_ctx_check: cuStreamSynchronize");
    return TALON_SUCCESS;
}

talon_status talon_ctx_check(talon_ctx *ctx, CUstream stream, talon_check_report *report) {
    static const char unknown[] = "(unknown: the record was not completely written)";
    const talon__driver *d;
    talon__check_record rec;
    talon_status s;
    CUcontext prev;
    CUresult r;
    if (!report) return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "talon_ctx_check: report is NULL");
    memset(report, 0, sizeof *report);
    if (!ctx) return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "talon_ctx_check: ctx is NULL");
    if (!ctx->check)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "talon_ctx_check: the ctx was created "
                           "without TALON_CTX_CHECKED (its kernels check no index)");
    d = ctx->drv;
    memset(&rec, 0, sizeof rec);
    pthread_mutex_lock(&ctx->check_lock);
    if ((r = d->cuCtxPushCurrent(ctx->cu)) != CUDA_SUCCESS) {
        pthread_mutex_unlock(&ctx->check_lock);
        return talon__fail_cu(d, TALON_ERROR_DRIVER, r, "talon_ctx_check: cuCtxPushCurrent");
    }
    s = talon__check_read(ctx, stream, &rec);
    r = d->cuCtxPopCurrent(&prev);
    pthread_mutex_unlock(&ctx->check_lock);
    if (s != TALON_SUCCESS) return s;
    if (r != CUDA_SUCCESS)
        return talon__fail_cu(d, TALON_ERROR_DRIVER, r, "talon_ctx_check: cuCtxPopCurrent");
    if (!rec.claim) return TALON_SUCCESS;
    report->violated = 1;
    if (!rec.done || rec.site < 0 || rec.site >= TALON__CHECK_NUM_SITES || rec.kernel < 0 ||
        rec.kernel >= TALON__NUM_KERNELS) {
        report->op = report->kernel = report->what = report->rule = unknown;
        return TALON_SUCCESS;
    }
    report->op = talon__check_sites[rec.site].op;
    report->kernel = talon__kernels[rec.kernel].symbol;
    report->what = talon__check_sites[rec.site].what;
    report->rule = talon__check_sites[rec.site].rule;
    report->index = rec.index;
    report->value = rec.value;
    report->bound = rec.bound;
    return TALON_SUCCESS;
}

/* ---------------------------------------------------------------- launch */
/* The kernel of `body` whose template arguments are the n ints that follow (the rest zero):
   its index into *k. A combination the table lacks is an error naming it; nothing is launched.
   The table is small: a scan costs nanoseconds. */
static talon_status talon__pick(const char *op, int *k, talon__body body, int n, ...) {
    int targs[TALON__TARGS_MAX] = {0}, i;
    char text[64];
    size_t used = 0;
    va_list ap;
    va_start(ap, n);
    for (i = 0; i < n && i < TALON__TARGS_MAX; i++) targs[i] = va_arg(ap, int);
    va_end(ap);
    for (*k = 0; *k < TALON__NUM_KERNELS; ++*k)
        if (talon__kernels[*k].body == body &&
            !memcmp(talon__kernels[*k].targs, targs, sizeof targs))
            return TALON_SUCCESS;
    *k = -1;
    for (i = 0; i < n && i < TALON__TARGS_MAX && used < sizeof text; i++)
        used += (size_t)snprintf(text + used, sizeof text - used, "%s%d", i ? ", " : "", targs[i]);
    return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                       "%s: no kernel %s<%s> in this bundle (an internal dispatch error: please "
                       "report it)", op, talon__body_names[body], text);
}

/* Kernel k's function, its module loaded first if needed (refused while capturing). */
static talon_status talon__kernel_fn(talon_ctx *ctx, CUstream stream, const char *op, int k,
                                     CUfunction *fn) {
    const talon__driver *d = ctx->drv;
    const talon__kernel *kd;
    CUfunction f;
    CUresult r;
    char what[96];
    if (k < 0 || k >= TALON__NUM_KERNELS)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: kernel index %d is outside the table of %d kernels", op, k,
                           (int)TALON__NUM_KERNELS);
    kd = &talon__kernels[k];
    f = __atomic_load_n(&ctx->functions[k], __ATOMIC_ACQUIRE);
    if (!f) {
        CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
        talon_status s;
        if ((r = d->cuStreamIsCapturing(stream, &cap)) != CUDA_SUCCESS) {
            snprintf(what, sizeof what, "%s: cuStreamIsCapturing", op);
            return talon__fail_cu(d, TALON_ERROR_DRIVER, r, what);
        }
        if (cap != CU_STREAM_CAPTURE_STATUS_NONE)
            return talon__fail(TALON_ERROR_NOT_LOADED,
                               "%s: kernel %s is not loaded and the stream is capturing; call "
                               "talon_ctx_preload() (or create the ctx with TALON_CTX_PRELOAD) "
                               "before capture",
                               op, kd->symbol);
        pthread_mutex_lock(&ctx->lock);
        s = talon__load_image(ctx, kd->image, op);
        pthread_mutex_unlock(&ctx->lock);
        if (s != TALON_SUCCESS) return s;
        f = __atomic_load_n(&ctx->functions[k], __ATOMIC_ACQUIRE);
    }
    *fn = f;
    return TALON_SUCCESS;
}

/* Launches f, kernel k of the table (its block and shared memory), as talon__launch_ex. */
static talon_status talon__launch_fn(talon_ctx *ctx, CUstream stream, const char *op, int k,
                                     CUfunction f, int64_t grid_x, int64_t grid_y, void *params,
                                     int dependent) {
    const talon__driver *d = ctx->drv;
    const talon__kernel *kd = &talon__kernels[k];
    CUresult r;
    void *argv[1];
    char what[96];
    argv[0] = params;
    if (dependent) {
        CUlaunchAttribute attr;
        CUlaunchConfig cfg;
        memset(&attr, 0, sizeof attr);
        memset(&cfg, 0, sizeof cfg);
        attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        cfg.gridDimX = (unsigned)grid_x; cfg.gridDimY = (unsigned)grid_y; cfg.gridDimZ = 1;
        cfg.blockDimX = (unsigned)kd->block; cfg.blockDimY = 1; cfg.blockDimZ = 1;
        cfg.sharedMemBytes = (unsigned)kd->smem;
        cfg.hStream = stream;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
        r = d->cuLaunchKernelEx(&cfg, f, argv, NULL);
    } else {
        r = d->cuLaunchKernel(f, (unsigned)grid_x, (unsigned)grid_y, 1, (unsigned)kd->block, 1,
                              1, (unsigned)kd->smem, stream, argv, NULL);
    }
    if (r != CUDA_SUCCESS) {
        snprintf(what, sizeof what, "%s: %s(%s)", op,
                 dependent ? "cuLaunchKernelEx" : "cuLaunchKernel", kd->symbol);
        return talon__fail_cu(d, TALON_ERROR_DRIVER, r, what);
    }
    return TALON_SUCCESS;
}

/* Launches kernel k on a grid_x x grid_y grid with the table's block and shared memory; with
   `dependent`, as a programmatic dependent of the stream's previous kernel
   (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION), so its launch overlaps that kernel's
   end; the kernel must wait for the previous one's results itself (griddepcontrol.wait). */
static talon_status talon__launch_ex(talon_ctx *ctx, CUstream stream, const char *op, int k,
                                     int64_t grid_x, int64_t grid_y, void *params, int dependent) {
    CUfunction f;
    const talon_status s = talon__kernel_fn(ctx, stream, op, k, &f);
    if (s != TALON_SUCCESS) return s;
    return talon__launch_fn(ctx, stream, op, k, f, grid_x, grid_y, params, dependent);
}

/* Kernel k on `blocks` CTAs after zeroing `words` uint32 from counter (a memset node when
   captured): for kernels that take work from counters. */
static talon_status talon__launch_counted(talon_ctx *ctx, CUstream stream, const char *op, int k,
                                          int64_t blocks, void *params, CUdeviceptr counter,
                                          int64_t words) {
    CUfunction f;
    CUresult r;
    char what[96];
    const talon_status s = talon__kernel_fn(ctx, stream, op, k, &f);
    if (s != TALON_SUCCESS) return s;
    if ((r = ctx->drv->cuMemsetD32Async(counter, 0, (size_t)words, stream)) != CUDA_SUCCESS) {
        snprintf(what, sizeof what, "%s: cuMemsetD32Async(workspace)", op);
        return talon__fail_cu(ctx->drv, TALON_ERROR_DRIVER, r, what);
    }
    return talon__launch_fn(ctx, stream, op, k, f, blocks, 1, params, 0);
}

static talon_status talon__launch2d(talon_ctx *ctx, CUstream stream, const char *op, int k,
                                    int64_t grid_x, int64_t grid_y, void *params) {
    return talon__launch_ex(ctx, stream, op, k, grid_x, grid_y, params, 0);
}

static talon_status talon__launch(talon_ctx *ctx, CUstream stream, const char *op, int k,
                                  int64_t blocks, void *params) {
    return talon__launch2d(ctx, stream, op, k, blocks, 1, params);
}

/* The smallest l with 2^l >= v (log2 of a power of two). */
static uint32_t talon__ceil_log2(uint64_t v) {
    uint32_t l = 0;
    while ((1ull << l) < v) l++;
    return l;
}

/* A kernel's n / d without a divide (dev/math.cuh div_magic), for 1 <= d < 2^31 and n < 2^31:
   n / d = (umulhi(n, m) + n) >> l with l = ceil(log2 d), m = floor(2^32 (2^l - d) / d) + 1
   (the round-up method). */
static void talon__div_magic(uint64_t d, uint32_t *m, uint32_t *l) {
    *l = talon__ceil_log2(d);
    *m = (uint32_t)((((1ull << *l) - d) << 32) / d + 1);
}

#ifdef __cplusplus
}
#endif
#endif
