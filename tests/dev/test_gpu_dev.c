/* GPU unit tests for the talon::dev Hopper primitives (kernels/dev/ headers) through the test
 * kernels of tests/dev/dev_kernels.cu, loaded from a cubin at run time:
 *     test_gpu_dev [path/to/dev_kernels.cubin]  (else $TALON_DEV_CUBIN, else the cubin beside it)
 * Opens libcuda itself (dlopen + cuGetProcAddress_v2), builds tensor maps with
 * cuTensorMapEncodeTiled (talon__tensor_map, include/talon/impl/tma.h), poisons every output with 0xFF bytes, and
 * checks every output element against a CPU reference: bit-exact for copies; for the matrix
 * products, per element, |gpu - ref| <= 2^-16 * sum_k |a_k b_k| for bf16/f16 and 2^-9 * sum for
 * fp8 e4m3, ref in fp64. The bf16 inputs are k/256 so fp32 accumulation is in fact exact; the
 * fp8 tensor cores accumulate with fewer mantissa bits than fp32 (about 6e-4 * sum seen at
 * K = 256..384 on H200), hence the looser fp8 bound. Also checks the tile scheduler's order
 * against an independent enumeration (CPU) of the tiles the device walked, and the pipeline
 * state's skip against stage arithmetic.
 * Needs an sm_90a GPU (H100/H200). Exit status 0 only when every case passed. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include <dlfcn.h>
#include <cmocka.h>
#include <cuda.h>
/* The tensor maps come from the library's own encoder (include/talon/impl/tma.h, through a talon
   context), so its rules are exercised on hardware here. */
#define TALON_IMPLEMENTATION
#include "talon.h"

/* ---------------------------------------------------------------- driver */
#define DEV_FUNCS(X)                                                                           \
    X(cuInit, 2000, (unsigned int))                                                            \
    X(cuDeviceGetCount, 2000, (int *))                                                         \
    X(cuDeviceGet, 2000, (CUdevice *, int))                                                    \
    X(cuDeviceGetName, 2000, (char *, int, CUdevice))                                          \
    X(cuDeviceGetAttribute, 2000, (int *, CUdevice_attribute, CUdevice))                       \
    X(cuDevicePrimaryCtxRetain, 7000, (CUcontext *, CUdevice))                                 \
    X(cuCtxSetCurrent, 4000, (CUcontext))                                                      \
    X(cuCtxSynchronize, 2000, (void))                                                          \
    X(cuModuleLoadData, 2000, (CUmodule *, const void *))                                      \
    X(cuModuleGetFunction, 2000, (CUfunction *, CUmodule, const char *))                       \
    X(cuFuncSetAttribute, 9000, (CUfunction, CUfunction_attribute, int))                       \
    X(cuLaunchKernel, 4000,                                                                    \
      (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,       \
       CUstream, void **, void **))                                                            \
    X(cuMemAlloc, 3020, (CUdeviceptr *, size_t))                                               \
    X(cuMemFree, 3020, (CUdeviceptr))                                                          \
    X(cuMemcpyHtoD, 3020, (CUdeviceptr, const void *, size_t))                                 \
    X(cuMemcpyDtoH, 3020, (void *, CUdeviceptr, size_t))                                       \
    X(cuMemsetD8, 3020, (CUdeviceptr, unsigned char, size_t))                                  \
    X(cuGetErrorString, 6000, (CUresult, const char **))

#define DEV_FIELD(name, version, args) CUresult (*name) args;
static struct {
    DEV_FUNCS(DEV_FIELD)
} cu;
#undef DEV_FIELD

static CUmodule module;
static talon_ctx *tctx; /* for talon__tensor_map */
static int num_sms;
static long long n_cases, n_elements, n_failed_elements;
static int quick; /* TALON_TEST_QUICK set and not 0: skip the largest GEMM (sanitizer runs) */
static const char *filter; /* TALON_DEV_FILTER: run only the cases whose name contains it */

/* Cases with "probe" in their name try corners the kernels must avoid: an innermost TMA box
 * coordinate that is not a multiple of 16 bytes (loads and stores), negative coordinates in a
 * TMA store, and a no-swizzle wgmma descriptor with LBO and SBO swapped. On an H200 (driver 580)
 * each of them faults ("illegal instruction"; the swapped descriptor "illegal memory access"),
 * which kills the context, so they run only when TALON_DEV_FILTER names one (one process each);
 * they are kept to re-check those rules on new drivers and chips. */
static int selected(const char *name) {
    if (filter) return strstr(name, filter) != NULL;
    return strstr(name, "probe") == NULL;
}

static const char *cu_err(CUresult r) {
    const char *s = NULL;
    if (!cu.cuGetErrorString || cu.cuGetErrorString(r, &s) != CUDA_SUCCESS || !s) return "?";
    return s;
}

#define CU_CHECK(call)                                                                         \
    do {                                                                                       \
        CUresult r_ = (call);                                                                  \
        if (r_ != CUDA_SUCCESS) fail_msg("%s failed: %s (%d)", #call, cu_err(r_), (int)r_);    \
    } while (0)

static int open_driver(char *err, size_t errlen) {
    typedef CUresult (*get_proc_fn)(const char *, void **, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult *);
    get_proc_fn get_proc;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CUdevice dev;
    CUcontext ctx;
    char name[256];
    int count = 0;
    CUresult r;
    if (!lib) {
        snprintf(err, errlen, "libcuda.so.1 could not be loaded");
        return -1;
    }
    *(void **)(&get_proc) = dlsym(lib, "cuGetProcAddress_v2");
    if (!get_proc) {
        snprintf(err, errlen, "libcuda.so.1 has no cuGetProcAddress_v2");
        return -1;
    }
#define DEV_RESOLVE(name, version, args)                                                       \
    if (get_proc(#name, (void **)&cu.name, version, CU_GET_PROC_ADDRESS_DEFAULT, NULL) ||      \
        !cu.name) {                                                                            \
        snprintf(err, errlen, "driver lacks %s", #name);                                      \
        return -1;                                                                             \
    }
    DEV_FUNCS(DEV_RESOLVE)
#undef DEV_RESOLVE
    if ((r = cu.cuInit(0)) || (r = cu.cuDeviceGetCount(&count))) {
        snprintf(err, errlen, "cuInit: %s", cu_err(r));
        return -1;
    }
    if (count < 1) {
        snprintf(err, errlen, "no CUDA device");
        return -1;
    }
    if ((r = cu.cuDeviceGet(&dev, 0)) || (r = cu.cuDeviceGetName(name, sizeof name, dev)) ||
        (r = cu.cuDeviceGetAttribute(&num_sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev)) ||
        (r = cu.cuDevicePrimaryCtxRetain(&ctx, dev)) || (r = cu.cuCtxSetCurrent(ctx))) {
        snprintf(err, errlen, "opening device 0: %s", cu_err(r));
        return -1;
    }
    printf("test_gpu_dev: %s, %d SMs\n", name, num_sms);
    return 0;
}

static int load_module(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    long n;
    char *buf;
    CUresult r;
    if (!f) {
        snprintf(err, errlen, "cannot open %s", path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(buf);
        snprintf(err, errlen, "cannot read %s", path);
        return -1;
    }
    fclose(f);
    r = cu.cuModuleLoadData(&module, buf);
    free(buf);
    if (r) {
        snprintf(err, errlen, "cuModuleLoadData(%s): %s", path, cu_err(r));
        return -1;
    }
    return 0;
}

static CUfunction get_fn(const char *name) {
    CUfunction f = NULL;
    CU_CHECK(cu.cuModuleGetFunction(&f, module, name));
    return f;
}

static void launch(const char *name, unsigned gx, unsigned gy, unsigned gz, unsigned block,
                   unsigned smem, void **params) {
    CUfunction f = get_fn(name);
    if (smem > 48 * 1024)
        CU_CHECK(cu.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem));
    CU_CHECK(cu.cuLaunchKernel(f, gx, gy, gz, block, 1, 1, smem, NULL, params, NULL));
    CU_CHECK(cu.cuCtxSynchronize());
}

/* Device buffer filled from host (or poisoned with 0xFF when host is NULL). */
static CUdeviceptr dev_buf(const void *host, size_t bytes) {
    CUdeviceptr p = 0;
    CU_CHECK(cu.cuMemAlloc(&p, bytes));
    if (host)
        CU_CHECK(cu.cuMemcpyHtoD(p, host, bytes));
    else
        CU_CHECK(cu.cuMemsetD8(p, 0xFF, bytes));
    return p;
}

static void *host_from(CUdeviceptr p, size_t bytes) {
    void *h = malloc(bytes);
    assert_non_null(h);
    CU_CHECK(cu.cuMemcpyDtoH(h, p, bytes));
    return h;
}

static void map_2d(CUtensorMap *m, CUtensorMapDataType type, CUdeviceptr base, uint64_t rows,
                   uint64_t cols, uint64_t stride, uint32_t box_rows, uint32_t box_cols,
                   CUtensorMapSwizzle sw) {
    talon__tensor_map_shape t;
    memset(&t, 0, sizeof t);
    t.type = type; t.rank = 2; t.swizzle = sw;
    t.dims[0] = cols; t.dims[1] = rows; t.strides[0] = stride;
    t.box[0] = box_cols; t.box[1] = box_rows;
    if (talon__tensor_map(tctx, "test_gpu_dev", "map", m, base, &t) != TALON_SUCCESS)
        fail_msg("tensor map %llu x %llu, box %u x %u: %s", (unsigned long long)rows,
                 (unsigned long long)cols, box_rows, box_cols, talon_last_error());
}

/* ---------------------------------------------------------------- data */
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static int rnd_int(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }

static double bf16_to_f64(uint16_t h) {
    union { uint32_t u; float f; } v;
    v.u = (uint32_t)h << 16;
    return v.f;
}
/* k / 256 with |k| <= 256: exact in bf16 (a float's top half). */
static uint16_t bf16_random(void) {
    union { uint32_t u; float f; } v;
    v.f = (float)rnd_int(-256, 256) / 256.0f;
    return (uint16_t)(v.u >> 16);
}
static double f16_to_f64(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double x = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h >> 15) ? -x : x;
}
/* k / 1024 with |k| <= 1024: exact in fp16 (all normal). */
static uint16_t f16_random(void) {
    int k = rnd_int(-1024, 1024), e;
    double m;
    uint16_t s = k < 0 ? 0x8000 : 0;
    if (k == 0) return s;
    m = frexp(fabs(k / 1024.0), &e); /* |x| = m 2^e, m in [0.5, 1) */
    return (uint16_t)(s | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)((m * 2 - 1) * 1024));
}
static double e4m3_to_f64(uint8_t b) {
    int e = (b >> 3) & 15, m = b & 7;
    double x = e == 0 ? ldexp(m, -9) : ldexp(8 + m, e - 10);
    return (b >> 7) ? -x : x;
}
/* Any finite e4m3 with magnitude below 2^3 (exponent field <= 9). */
static uint8_t e4m3_random(void) {
    return (uint8_t)((rnd() & 0x80) | (rnd_int(0, 9) << 3) | (rnd() & 7));
}

/* Per-case bookkeeping: count elements, report the first mismatches, fail the test. */
typedef struct {
    const char *name;
    long long checked, bad;
} check;
static void check_begin(check *c, const char *name) {
    c->name = name;
    c->checked = c->bad = 0;
    n_cases++;
}
static void check_one(check *c, int ok, const char *fmt, ...) {
    c->checked++;
    if (ok) return;
    if (c->bad++ < 5) {
        va_list ap;
        va_start(ap, fmt);
        printf("  %s: mismatch: ", c->name);
        vprintf(fmt, ap);
        printf("\n");
        va_end(ap);
    }
}
static void check_end(check *c) {
    n_elements += c->checked;
    n_failed_elements += c->bad;
    printf("  %-44s %9lld elements, %lld bad\n", c->name, c->checked, c->bad);
    fflush(stdout);
    if (c->bad) fail_msg("%s: %lld of %lld elements wrong", c->name, c->bad, c->checked);
}

/* ---------------------------------------------------------------- (1) TMA load */
typedef struct {
    const char *name;
    int batch, rows, cols, pitch, matrix_rows; /* matrix z at z * matrix_rows * pitch */
    int box_rows, box_cols, off_r, off_c, swz128, hint, gz;
} load_case;

static void run_load(const load_case *lc) {
    size_t in_elems = (size_t)lc->batch * lc->matrix_rows * lc->pitch, out_elems, i;
    uint16_t *in = malloc(in_elems * 2), *out;
    int gx = (lc->cols - lc->off_c + lc->box_cols - 1) / lc->box_cols + 1; /* +1: a box past the end */
    int gy = (lc->rows - lc->off_r + lc->box_rows - 1) / lc->box_rows + 1;
    int out_cols = gx * lc->box_cols, out_rows = gy * lc->box_rows, z, y, x;
    CUdeviceptr din, dout;
    CUtensorMap map;
    check c;
    void *params[8];
    if (!selected(lc->name)) {
        free(in);
        return;
    }
    assert_non_null(in);
    for (i = 0; i < in_elems; i++) in[i] = bf16_random();
    out_elems = (size_t)lc->gz * out_rows * out_cols;
    din = dev_buf(in, in_elems * 2);
    dout = dev_buf(NULL, out_elems * 2);
    if (lc->gz > 1) {
        talon__tensor_map_shape t;
        memset(&t, 0, sizeof t);
        t.type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16; t.rank = 3; t.swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
        t.dims[0] = (uint64_t)lc->cols; t.dims[1] = (uint64_t)lc->rows; t.dims[2] = (uint64_t)lc->batch;
        t.strides[0] = (uint64_t)lc->pitch * 2; t.strides[1] = (uint64_t)lc->matrix_rows * lc->pitch * 2;
        t.box[0] = (uint32_t)lc->box_cols; t.box[1] = (uint32_t)lc->box_rows; t.box[2] = 1;
        if (talon__tensor_map(tctx, "test_gpu_dev", "map", &map, din, &t) != TALON_SUCCESS)
            fail_msg("3D tensor map: %s", talon_last_error());
    } else {
        map_2d(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, din, (uint64_t)lc->rows, (uint64_t)lc->cols,
               (uint64_t)lc->pitch * 2, (uint32_t)lc->box_rows, (uint32_t)lc->box_cols,
               lc->swz128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE);
    }
    params[0] = &map;
    params[1] = &dout;
    params[2] = (void *)&lc->box_rows;
    params[3] = (void *)&lc->box_cols;
    params[4] = (void *)&lc->off_r;
    params[5] = (void *)&lc->off_c;
    params[6] = (void *)&lc->swz128;
    params[7] = (void *)&lc->hint;
    launch("dev_tma_load_box", (unsigned)gx, (unsigned)gy, (unsigned)lc->gz, 128,
           (unsigned)(lc->box_rows * lc->box_cols * 2 + 1024), params);
    out = host_from(dout, out_elems * 2);
    check_begin(&c, lc->name);
    for (z = 0; z < lc->gz; z++)
        for (y = 0; y < out_rows; y++)
            for (x = 0; x < out_cols; x++) {
                int r = y + lc->off_r, col = x + lc->off_c;
                uint16_t want = 0, got = out[((size_t)z * out_rows + y) * out_cols + x];
                if (z < lc->batch && r >= 0 && r < lc->rows && col >= 0 && col < lc->cols)
                    want = in[((size_t)z * lc->matrix_rows + r) * lc->pitch + col];
                check_one(&c, got == want, "z %d row %d col %d: got 0x%04x want 0x%04x", z, r, col, got, want);
            }
    cu.cuMemFree(din);
    cu.cuMemFree(dout);
    free(in);
    free(out);
    check_end(&c);
}

static void test_tma_load(void **state) {
    static const load_case cases[] = {
        /* name                                batch rows cols pitch mrows box   off    sw h gz */
        {"tma load 2d 77x203 box 16x32", 1, 77, 203, 208, 77, 16, 32, 0, 0, 0, 0, 1},
        {"tma load 2d box 8x64 sw128 off -3,-8", 1, 77, 203, 208, 77, 8, 64, -3, -8, 1, 0, 1},
        {"tma load 2d box 32x16 evict_first off 5,-16", 1, 77, 203, 208, 77, 32, 16, 5, -16, 0, 1, 1},
        {"tma load 2d box 24x64 sw128 evict_last", 1, 130, 99, 104, 130, 24, 64, 0, 0, 1, 2, 1},
        {"tma load 3d 3x37x45 box 16x16", 3, 37, 45, 48, 40, 16, 16, -2, 0, 0, 0, 4},
        {"probe load odd col off 0,-5", 1, 77, 203, 208, 77, 16, 32, 0, -5, 0, 0, 1},
        {"probe load odd col off 0,3", 1, 77, 203, 208, 77, 16, 32, 0, 3, 0, 0, 1},
        {"probe load sw128 odd col off 0,-5", 1, 77, 203, 208, 77, 8, 64, 0, -5, 1, 0, 1},
        {"probe load sw128 odd col off 0,3", 1, 77, 203, 208, 77, 8, 64, 0, 3, 1, 0, 1},
        {"probe load sw128 off 0,0", 1, 77, 203, 208, 77, 8, 64, 0, 0, 1, 0, 1},
    };
    size_t i;
    (void)state;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) run_load(&cases[i]);
}

/* ---------------------------------------------------------------- (2) TMA store, bulk copy */
/* The boxes start at (off_r, off_c) >= 0 and tile forward past the end. TMA stores clip rows
 * exactly but the inner dimension only at 16-byte granularity (seen on H200): with cols * 2 not
 * a multiple of 16, the rest of the last 16-byte chunk of each row (row padding) is written too.
 * Those elements are not checked; every other element outside the stored region (rows before
 * off_r, columns before off_c, padding, two guard rows after the matrix) must keep its poison. */
static void run_store(const char *name, int rows, int cols, int pitch, int box_rows, int box_cols,
                      int off_r, int off_c) {
    size_t n = (size_t)rows * pitch, n_alloc = n + 2 * (size_t)pitch, i;
    int cols16 = (cols + 7) / 8 * 8; /* first column of the next 16-byte chunk */
    uint16_t *src = malloc(n * 2), *out;
    int gx = (cols - off_c + box_cols - 1) / box_cols, gy = (rows - off_r + box_rows - 1) / box_rows, r;
    CUdeviceptr dsrc, dout;
    CUtensorMap map;
    check c;
    void *params[9] = {&map, &dsrc, &rows, &cols, &pitch, &box_rows, &box_cols, &off_r, &off_c};
    if (!selected(name)) {
        free(src);
        return;
    }
    assert_non_null(src);
    for (i = 0; i < n; i++) src[i] = bf16_random();
    dsrc = dev_buf(src, n * 2);
    dout = dev_buf(NULL, n_alloc * 2);
    map_2d(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, dout, (uint64_t)rows, (uint64_t)cols,
           (uint64_t)pitch * 2, (uint32_t)box_rows, (uint32_t)box_cols, CU_TENSOR_MAP_SWIZZLE_NONE);
    launch("dev_tma_store_box", (unsigned)gx, (unsigned)gy, 1, 128,
           (unsigned)(box_rows * box_cols * 2 + 1024), params);
    out = host_from(dout, n_alloc * 2);
    check_begin(&c, name);
    for (r = 0; r < rows + 2; r++) {
        int col;
        for (col = 0; col < pitch; col++) {
            uint16_t got = out[(size_t)r * pitch + col], want = 0xFFFF; /* padding, guard rows */
            int stored_row = r >= off_r && r < rows;
            if (stored_row && col >= cols && col < cols16) continue; /* same 16-byte chunk */
            if (stored_row && col >= off_c && col < cols) want = src[(size_t)r * pitch + col];
            check_one(&c, got == want, "row %d col %d: got 0x%04x want 0x%04x", r, col, got, want);
        }
    }
    cu.cuMemFree(dsrc);
    cu.cuMemFree(dout);
    free(src);
    free(out);
    check_end(&c);
}

static void test_tma_store(void **state) {
    (void)state;
    run_store("tma store 2d 77x200 box 16x32", 77, 200, 208, 16, 32, 0, 0);
    run_store("tma store 2d 77x203 box 16x32", 77, 203, 208, 16, 32, 0, 0);
    run_store("tma store 2d 77x203 box 8x64 off 3,8", 77, 203, 208, 8, 64, 3, 8);
    run_store("probe store negative coords off -3,-8", 77, 203, 208, 8, 64, -3, -8);
    run_store("probe store odd col off 0,5", 77, 203, 208, 8, 64, 0, 5);
    run_store("tma store 2d 300x40 box 256x8", 300, 40, 48, 256, 8, 0, 0);
}

static void test_bulk_copy(void **state) {
    uint32_t chunk = 4096 + 48;
    unsigned blocks = 7;
    size_t n = (size_t)chunk * blocks, i;
    uint8_t *src = malloc(n), *out;
    CUdeviceptr dsrc, dout;
    check c;
    void *params[3] = {&dsrc, &dout, &chunk};
    (void)state;
    if (!selected("bulk copy 1d 7 x 4144 B")) {
        free(src);
        return;
    }
    assert_non_null(src);
    for (i = 0; i < n; i++) src[i] = (uint8_t)rnd();
    dsrc = dev_buf(src, n);
    dout = dev_buf(NULL, n + 64);
    launch("dev_bulk_copy", blocks, 1, 1, 32, chunk + 1024, params);
    out = host_from(dout, n + 64);
    check_begin(&c, "bulk copy 1d 7 x 4144 B");
    for (i = 0; i < n + 64; i++) {
        uint8_t want = i < n ? src[i] : 0xFF;
        check_one(&c, out[i] == want, "byte %zu: got 0x%02x want 0x%02x", i, out[i], want);
    }
    cu.cuMemFree(dsrc);
    cu.cuMemFree(dout);
    free(src);
    free(out);
    check_end(&c);
}

/* cp.async with zero fill, completion counted on an mbarrier (kernels/dev/async.cuh): every
   piece read back by another thread is the source where copied and zeros after its copied
   bytes (none, all 16, or a part: 1..15). */
static void test_cp_async_mbar(void **state) {
    int pieces = 9;
    const size_t total = 128 * (size_t)pieces;
    uint32_t *src = malloc(total * 16), *bytes = malloc(total * 4), *out;
    CUdeviceptr dsrc, dbytes, dout;
    check c;
    size_t i, b;
    void *params[4] = {&dsrc, &dbytes, &dout, &pieces};
    (void)state;
    if (!selected("cp.async zero-fill into an mbarrier")) {
        free(src);
        free(bytes);
        return;
    }
    assert_non_null(src);
    assert_non_null(bytes);
    for (i = 0; i < total * 4; i++) src[i] = rnd() | 0x01010101u; /* no zero byte: zeros are the fill */
    for (i = 0; i < total; i++) {
        const uint32_t r = rnd() % 4;
        bytes[i] = r == 0 ? 0 : r == 1 ? 16 : 1 + rnd() % 15;
    }
    dsrc = dev_buf(src, total * 16);
    dbytes = dev_buf(bytes, total * 4);
    dout = dev_buf(NULL, total * 16);
    launch("dev_cp_async_mbar", 1, 1, 1, 128, (unsigned)(total * 16) + 1024, params);
    out = host_from(dout, total * 16);
    check_begin(&c, "cp.async zero-fill into an mbarrier");
    for (i = 0; i < total; i++) {
        const size_t from = (i + 37 * (size_t)pieces) % total;
        const uint8_t *got = (const uint8_t *)(out + i * 4), *in = (const uint8_t *)(src + from * 4);
        for (b = 0; b < 16; b++) {
            const uint8_t want = b < bytes[from] ? in[b] : 0;
            check_one(&c, got[b] == want, "piece %zu (%u bytes copied) byte %zu: got 0x%02x "
                      "want 0x%02x", i, bytes[from], b, got[b], want);
        }
    }
    cu.cuMemFree(dsrc);
    cu.cuMemFree(dbytes);
    cu.cuMemFree(dout);
    free(src);
    free(bytes);
    free(out);
    check_end(&c);
}

/* ---------------------------------------------------------------- (3) multicast */
static void test_tma_multicast(void **state) {
    int rows = 150, cols = 100, pitch = 104, half_rows = 16, box_cols = 32;
    int tile_rows = 2 * half_rows, n = tile_rows * box_cols;
    int clusters = (rows + tile_rows - 1) / tile_rows, gx = 2 * clusters;
    int gy = (cols + box_cols - 1) / box_cols, x, y, i;
    size_t in_elems = (size_t)rows * pitch, out_elems = (size_t)gx * gy * n;
    uint16_t *in = malloc(in_elems * 2), *out;
    uint32_t *flags;
    CUdeviceptr din, dout, dflags;
    CUtensorMap map;
    check c;
    void *params[5] = {&map, &dout, &half_rows, &box_cols, &dflags};
    (void)state;
    if (!selected("tma multicast cluster 2, 150x100 tiles 32x32")) {
        free(in);
        return;
    }
    assert_non_null(in);
    for (i = 0; i < (int)in_elems; i++) in[i] = bf16_random();
    din = dev_buf(in, in_elems * 2);
    dout = dev_buf(NULL, out_elems * 2);
    dflags = dev_buf(NULL, (size_t)clusters * gy * 4);
    map_2d(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, din, (uint64_t)rows, (uint64_t)cols,
           (uint64_t)pitch * 2, (uint32_t)half_rows, (uint32_t)box_cols, CU_TENSOR_MAP_SWIZZLE_NONE);
    launch("dev_tma_multicast", (unsigned)gx, (unsigned)gy, 1, 128, (unsigned)(n * 2 + 1024), params);
    out = host_from(dout, out_elems * 2);
    flags = host_from(dflags, (size_t)clusters * gy * 4);
    check_begin(&c, "tma multicast cluster 2, 150x100 tiles 32x32");
    for (y = 0; y < gy; y++)
        for (x = 0; x < gx; x++)
            for (i = 0; i < n; i++) {
                int r = (x / 2) * tile_rows + i / box_cols, col = y * box_cols + i % box_cols;
                uint16_t got = out[((size_t)y * gx + x) * n + i], want = 0;
                if (r < rows && col < cols) want = in[(size_t)r * pitch + col];
                check_one(&c, got == want, "cta %d,%d row %d col %d: got 0x%04x want 0x%04x", x, y, r,
                          col, got, want);
            }
    for (i = 0; i < clusters * gy; i++)
        check_one(&c, flags[i] == 2, "cluster %d: remote-arrive flag %u, want 2", i, flags[i]);
    cu.cuMemFree(din);
    cu.cuMemFree(dout);
    cu.cuMemFree(dflags);
    free(in);
    free(out);
    free(flags);
    check_end(&c);
}

/* ---------------------------------------------------------------- (4) one wgmma tile */
enum { T_BF16, T_F16, T_E4M3 };
static double elem(int type, const void *p, size_t i) {
    if (type == T_E4M3) return e4m3_to_f64(((const uint8_t *)p)[i]);
    if (type == T_F16) return f16_to_f64(((const uint16_t *)p)[i]);
    return bf16_to_f64(((const uint16_t *)p)[i]);
}

/* D[m x n] (fp32, ld n) against A[m x k] * B[n x k]^T in fp64; max |err| / sum|ab| -> *worst. */
static void check_gemm(check *c, int type, const void *a, const void *b, const float *d, int m, int n,
                       int k, double *worst) {
    const int bound_exp = type == T_E4M3 ? -9 : -16;
    int i, j, l;
    double *ad = malloc(sizeof(double) * (size_t)m * k), *bd = malloc(sizeof(double) * (size_t)n * k);
    assert_non_null(ad);
    assert_non_null(bd);
    for (i = 0; i < m * k; i++) ad[i] = elem(type, a, (size_t)i);
    for (i = 0; i < n * k; i++) bd[i] = elem(type, b, (size_t)i);
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++) {
            const double *ar = ad + (size_t)i * k, *br = bd + (size_t)j * k;
            double s = 0, sa = 0, got = d[(size_t)i * n + j], err;
            for (l = 0; l < k; l++) {
                s += ar[l] * br[l];
                sa += fabs(ar[l] * br[l]);
            }
            err = fabs(got - s);
            if (sa > 0 && err / sa > *worst) *worst = err / sa;
            check_one(c, err <= ldexp(sa, bound_exp), "D[%d][%d] = %.9g, want %.9g (sum|ab| %.4g)", i, j, got,
                      s, sa);
        }
    free(ad);
    free(bd);
}

static void fill(int type, void *p, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) {
        if (type == T_E4M3)
            ((uint8_t *)p)[i] = e4m3_random();
        else
            ((uint16_t *)p)[i] = type == T_F16 ? f16_random() : bf16_random();
    }
}

/* swizzle: 128, 64, 32 (one box per K-slab of that many bytes per row) or 0 (16-byte-wide boxes,
 * the no-swizzle core-matrix layout). */
static void run_wgmma(const char *kernel, int type, int n, int k, int swizzle) {
    int esize = type == T_E4M3 ? 1 : 2, bk = (swizzle ? swizzle : 16) / esize;
    CUtensorMapSwizzle sw = swizzle == 128 ? CU_TENSOR_MAP_SWIZZLE_128B
                            : swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                            : swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                            : CU_TENSOR_MAP_SWIZZLE_NONE;
    unsigned span = swizzle ? (unsigned)swizzle : 128;
    size_t a_bytes = (size_t)64 * k * esize, b_bytes = (size_t)n * k * esize;
    void *a = malloc(a_bytes), *b = malloc(b_bytes);
    float *d;
    CUdeviceptr da, db, dd;
    CUtensorMap ma, mb;
    CUtensorMapDataType tt = type == T_E4M3 ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                             : type == T_F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                             : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    char name[96];
    double worst = 0;
    check c;
    void *params[5] = {&ma, &mb, &dd, &k, &da};
    snprintf(name, sizeof name, "%s K=%d", kernel, k);
    if (!selected(name)) {
        free(a);
        free(b);
        return;
    }
    assert_non_null(a);
    assert_non_null(b);
    fill(type, a, a_bytes / esize);
    fill(type, b, b_bytes / esize);
    da = dev_buf(a, a_bytes);
    db = dev_buf(b, b_bytes);
    dd = dev_buf(NULL, (size_t)64 * n * 4);
    map_2d(&ma, tt, da, 64, (uint64_t)k, (uint64_t)k * esize, 64, (uint32_t)bk, sw);
    map_2d(&mb, tt, db, (uint64_t)n, (uint64_t)k, (uint64_t)k * esize, (uint32_t)n, (uint32_t)bk, sw);
    launch(kernel, 1, 1, 1, 128, 64 * span + (unsigned)n * span + 1024, params);
    d = host_from(dd, (size_t)64 * n * 4);
    check_begin(&c, name);
    check_gemm(&c, type, a, b, d, 64, n, k, &worst);
    printf("  %s: max |err| / sum|ab| = %.3g\n", name, worst);
    cu.cuMemFree(da);
    cu.cuMemFree(db);
    cu.cuMemFree(dd);
    free(a);
    free(b);
    free(d);
    check_end(&c);
}

/* C = A . B with B stored [k, n] row-major (MN-major in shared memory, transposed by the
 * instruction: attention's P v); checked as A . (B^T)^T against the same fp64 product. */
static void run_wgmma_mn(const char *kernel, int n, int k) {
    size_t a_bytes = (size_t)64 * k * 2, b_bytes = (size_t)n * k * 2;
    uint16_t *a = malloc(a_bytes), *b = malloc(b_bytes), *bt = malloc(b_bytes);
    float *d;
    CUdeviceptr da, db, dd;
    CUtensorMap mb;
    char name[96];
    double worst = 0;
    check c;
    int i, j;
    void *params[4] = {&mb, &dd, &k, &da};
    snprintf(name, sizeof name, "%s K=%d", kernel, k);
    if (!selected(name)) {
        free(a); free(b); free(bt);
        return;
    }
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(bt);
    fill(T_BF16, a, a_bytes / 2);
    fill(T_BF16, b, b_bytes / 2); /* [k][n] */
    for (i = 0; i < k; i++)
        for (j = 0; j < n; j++) bt[(size_t)j * k + i] = b[(size_t)i * n + j];
    da = dev_buf(a, a_bytes);
    db = dev_buf(b, b_bytes);
    dd = dev_buf(NULL, (size_t)64 * n * 4);
    map_2d(&mb, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, db, (uint64_t)k, (uint64_t)n, (uint64_t)n * 2, 64, 64,
           CU_TENSOR_MAP_SWIZZLE_128B);
    launch(kernel, 1, 1, 1, 128, (unsigned)n * 128 + 1024, params);
    d = host_from(dd, (size_t)64 * n * 4);
    check_begin(&c, name);
    check_gemm(&c, T_BF16, a, bt, d, 64, n, k, &worst);
    printf("  %s: max |err| / sum|ab| = %.3g\n", name, worst);
    cu.cuMemFree(da);
    cu.cuMemFree(db);
    cu.cuMemFree(dd);
    free(a); free(b); free(bt); free(d);
    check_end(&c);
}

static void test_wgmma_tile(void **state) {
    (void)state;
    run_wgmma("dev_wgmma_bf16_n64", T_BF16, 64, 128, 128);
    run_wgmma("dev_wgmma_bf16_n128", T_BF16, 128, 256, 128);
    run_wgmma("dev_wgmma_bf16_n256", T_BF16, 256, 192, 128);
    run_wgmma("dev_wgmma_f16_n128", T_F16, 128, 128, 128);
    run_wgmma("dev_wgmma_bf16rs_n128", T_BF16, 128, 256, 128);
    run_wgmma("dev_wgmma_e4m3_n128", T_E4M3, 128, 256, 128);
    run_wgmma("dev_wgmma_e4m3_n256", T_E4M3, 256, 384, 128);
    run_wgmma("dev_wgmma_e4m3rs_n128", T_E4M3, 128, 256, 128);
    run_wgmma("dev_wgmma_e4m3rs_n256", T_E4M3, 256, 384, 128);
    run_wgmma("dev_wgmma_bf16_n64_sw64", T_BF16, 64, 96, 64);
    run_wgmma("dev_wgmma_bf16_n64_sw32", T_BF16, 64, 80, 32);
    run_wgmma("dev_wgmma_bf16_n128_nosw", T_BF16, 128, 192, 0);
    run_wgmma("dev_wgmma_bf16_n128_nosw_probe", T_BF16, 128, 192, 0); /* LBO/SBO swapped */
    run_wgmma("dev_wgmma_e4m3_n64_sw64", T_E4M3, 64, 192, 64);
    run_wgmma_mn("dev_wgmma_bf16rs_mn_n64", 64, 128);
    run_wgmma_mn("dev_wgmma_bf16rs_mn_n256", 256, 192);
}

/* ---------------------------------------------------------------- (5) warp-specialised GEMM */
static void run_gemm(int m, int n, int k, int group, int grid) {
    size_t a_n = (size_t)m * k, b_n = (size_t)n * k;
    uint16_t *a = malloc(a_n * 2), *b = malloc(b_n * 2);
    float *d;
    int tiles = ((m + 127) / 128) * ((n + 127) / 128);
    unsigned smem = 4 * (128 * 64 * 2 * 2) + 2 * 4 * 8 + 1024;
    CUdeviceptr da, db, dd;
    CUtensorMap ma, mb;
    char name[96];
    double worst = 0;
    check c;
    void *params[7] = {&ma, &mb, &dd, &m, &n, &k, &group};
    if (grid <= 0) grid = tiles < num_sms ? tiles : num_sms;
    snprintf(name, sizeof name, "gemm_ws %dx%dx%d G=%d grid %d (%d tiles)", m, n, k, group, grid, tiles);
    if (!selected(name)) {
        free(a);
        free(b);
        return;
    }
    assert_non_null(a);
    assert_non_null(b);
    fill(T_BF16, a, a_n);
    fill(T_BF16, b, b_n);
    da = dev_buf(a, a_n * 2);
    db = dev_buf(b, b_n * 2);
    dd = dev_buf(NULL, (size_t)m * n * 4);
    map_2d(&ma, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, da, (uint64_t)m, (uint64_t)k, (uint64_t)k * 2, 128,
           64, CU_TENSOR_MAP_SWIZZLE_128B);
    map_2d(&mb, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, db, (uint64_t)n, (uint64_t)k, (uint64_t)k * 2, 128,
           64, CU_TENSOR_MAP_SWIZZLE_128B);
    launch("dev_gemm_ws", (unsigned)grid, 1, 1, 384, smem, params);
    d = host_from(dd, (size_t)m * n * 4);
    check_begin(&c, name);
    check_gemm(&c, T_BF16, a, b, d, m, n, k, &worst);
    printf("  %s: max |err| / sum|ab| = %.3g\n", name, worst);
    cu.cuMemFree(da);
    cu.cuMemFree(db);
    cu.cuMemFree(dd);
    free(a);
    free(b);
    free(d);
    check_end(&c);
}

static void test_gemm_ws(void **state) {
    (void)state;
    run_gemm(300, 520, 1000, 2, 0);
    run_gemm(300, 520, 1000, 1, 4); /* several tiles per CTA, pipeline phases carried across */
    run_gemm(64, 136, 64, 3, 1);
    if (!quick) run_gemm(520, 776, 1000, 4, 0);
}

/* ---------------------------------------------------------------- scheduler order */
/* Independent enumeration of the grouped raster: groups of g tile-rows; inside a group, column
 * by column, each column top to bottom. */
static void sched_reference(int tm, int tn, int g, int *m_of, int *n_of) {
    int t = 0, first, col, r;
    for (first = 0; first < tm; first += g) {
        int rows = tm - first < g ? tm - first : g;
        for (col = 0; col < tn; col++)
            for (r = 0; r < rows; r++) {
                m_of[t] = first + r;
                n_of[t] = col;
                t++;
            }
    }
}

static void test_scheduler(void **state) {
    static const int shapes[][6] = {
        /* m, n, tile_m, tile_n, group, grid */
        {300, 520, 128, 128, 2, 4}, {1000, 1000, 128, 64, 1, 7}, {1000, 1000, 128, 64, 3, 132},
        {4096, 8192, 128, 256, 8, 132}, {5, 5, 128, 128, 4, 3}, {129, 4000, 64, 256, 16, 5},
    };
    size_t s;
    (void)state;
    for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int m = shapes[s][0], n = shapes[s][1], tm_ = shapes[s][2], tn_ = shapes[s][3];
        int g = shapes[s][4], grid = shapes[s][5];
        int tm = (m + tm_ - 1) / tm_, tn = (n + tn_ - 1) / tn_, tiles = tm * tn, t;
        int *ref_m = malloc(sizeof(int) * (size_t)tiles), *ref_n = malloc(sizeof(int) * (size_t)tiles);
        char *seen = calloc((size_t)tiles, 1);
        int *got;
        CUdeviceptr dout;
        char name[96];
        check c;
        void *params[6] = {&m, &n, &tm_, &tn_, &g, &dout};
        snprintf(name, sizeof name, "scheduler %d x %d tiles G=%d grid %d", tm, tn, g, grid);
        if (!selected(name)) {
            free(ref_m);
            free(ref_n);
            free(seen);
            continue;
        }
        assert_non_null(ref_m);
        assert_non_null(ref_n);
        assert_non_null(seen);
        sched_reference(tm, tn, g, ref_m, ref_n);
        dout = dev_buf(NULL, sizeof(int) * 3 * (size_t)tiles);
        launch("dev_sched_order", (unsigned)grid, 1, 1, 32, 0, params);
        got = host_from(dout, sizeof(int) * 3 * (size_t)tiles);
        check_begin(&c, name);
        for (t = 0; t < tiles; t++) {
            int gm = got[3 * t], gn = got[3 * t + 1], cta = got[3 * t + 2];
            int ok = gm == ref_m[t] && gn == ref_n[t] && cta == t % grid && gm >= 0 && gm < tm &&
                     gn >= 0 && gn < tn && !seen[gm * tn + gn];
            if (gm >= 0 && gm < tm && gn >= 0 && gn < tn) seen[gm * tn + gn] = 1;
            check_one(&c, ok, "tile %d: (%d, %d) by CTA %d, want (%d, %d) by CTA %d", t, gm, gn, cta,
                      ref_m[t], ref_n[t], t % grid);
        }
        /* Every group of g tile-rows x tn columns is finished before the next starts. */
        for (t = 0; t < tiles; t++)
            check_one(&c, ref_m[t] / g == t / (g * tn), "tile %d outside its group", t);
        cu.cuMemFree(dout);
        free(ref_m);
        free(ref_n);
        free(seen);
        free(got);
        check_end(&c);
    }
}

/* load_relaxed (kernels/dev/async.cuh): each of 256 threads reads in[i % 6] as the host
   wrote it (ld.relaxed.gpu). */
static void test_load_relaxed(void **state) {
    static const int in[6] = {-1, 0, 127, 2147483647, -2147483647 - 1, 33};
    int n = 6, *got, i;
    CUdeviceptr din, dout;
    check c;
    void *params[3] = {&din, &n, &dout};
    (void)state;
    if (!selected("load_relaxed 256 threads")) return;
    din = dev_buf(in, sizeof in);
    dout = dev_buf(NULL, sizeof(int) * 256);
    launch("dev_load_relaxed", 1, 1, 1, 256, 0, params);
    got = host_from(dout, sizeof(int) * 256);
    check_begin(&c, "load_relaxed 256 threads");
    for (i = 0; i < 256; i++)
        check_one(&c, got[i] == in[i % 6], "thread %d: got %d want %d", i, got[i], in[i % 6]);
    cu.cuMemFree(din);
    cu.cuMemFree(dout);
    free(got);
    check_end(&c);
}

/* PipeState::skip(n) (kernels/dev/pipeline.cuh) lands where n advances would: stage
   (s0 + n) mod 6, phase flipped once per wrap, from every start s0 < 24 and n < 24. */
static void test_pipe_skip(void **state) {
    int *got, s0, n;
    CUdeviceptr dout;
    check c;
    void *params[1] = {&dout};
    (void)state;
    if (!selected("PipeState<6> skip")) return;
    dout = dev_buf(NULL, sizeof(int) * 2 * 24 * 24);
    launch("dev_pipe_skip", 1, 1, 1, 32, 0, params);
    got = host_from(dout, sizeof(int) * 2 * 24 * 24);
    check_begin(&c, "PipeState<6> skip");
    for (s0 = 0; s0 < 24; s0++)
        for (n = 0; n < 24; n++) {
            const int *g = got + 2 * (24 * s0 + n);
            check_one(&c, g[0] == (s0 + n) % 6 && g[1] == (s0 + n) / 6 % 2,
                      "from %d, skip %d: stage %d phase %d, want %d %d", s0, n, g[0], g[1],
                      (s0 + n) % 6, (s0 + n) / 6 % 2);
        }
    cu.cuMemFree(dout);
    free(got);
    check_end(&c);
}

/* Runs `kernel`(values, f16, out) over NV values x every bf16 and f16 pattern (blocks (v, h /
   256)); out holds per pair the divider's e4m3 byte and __fdiv_rn's, which must agree (a pair
   both 0xAA: outside the divider's domain, or equal anyway). `what` names the value in a
   mismatch's report. */
static void check_e4m3_pairs(const char *name, const char *kernel, const float *values, int nv,
                             const char *what) {
    uint8_t *got;
    CUdeviceptr dvalues, dout;
    int f16, v;
    check c;
    void *params[3] = {&dvalues, &f16, &dout};
    if (!selected(name)) return;
    dvalues = dev_buf(values, sizeof(float) * (size_t)nv);
    dout = dev_buf(NULL, (size_t)2 * 65536 * nv);
    check_begin(&c, name);
    for (f16 = 0; f16 < 2; f16++) {
        launch(kernel, (unsigned)nv, 256, 1, 256, 0, params);
        got = host_from(dout, (size_t)2 * 65536 * nv);
        for (v = 0; v < nv; v++) {
            uint32_t h;
            for (h = 0; h < 65536; h++) {
                const uint8_t *g = got + 2 * ((size_t)65536 * v + h);
                if (g[0] == 0xAA && g[1] == 0xAA) continue;
                check_one(&c, g[0] == g[1], "%s 0x%04x, %s %a: 0x%02x, x / s gives 0x%02x",
                          f16 ? "f16" : "bf16", h, what, values[v], g[0], g[1]);
            }
        }
        free(got);
    }
    cu.cuMemFree(dvalues);
    cu.cuMemFree(dout);
    check_end(&c);
}

/* E4m3Divider (kernels/dev/fp8.cuh): for a scale computed from the values (s = e4m3_scale(amax),
   |x| <= amax), the same e4m3 byte as the IEEE quotient x / s, for every bf16 and f16 pattern
   x over amaxes at the edges (0, subnormal, around 448 * 2^-126 and 448 * 2^-90 where the
   divider starts prescaling, 1, 448, the largest finite, inf) and 64 random finite ones; the
   exhaustive CPU evidence is `make check-fp8-div`. */
static void test_e4m3_divider(void **state) {
    enum { NA = 76 };
    static const float edges[] = {0.0f, 0x1p-133f, 0x1.c0p-118f, 0x1.c2p-118f, 1.0f, 448.0f,
                                  65504.0f, 0x1.fep127f, INFINITY, 3.0f,
                                  0x1.c0p-82f,  /* s = 2^-90: the direct quotient */
                                  0x1.bep-82f}; /* just below: prescaled */
    float amax[NA];
    uint64_t rng = 0x2545F4914F6CDD1Dull;
    int a;
    (void)state;
    for (a = 0; a < NA; a++) { /* then random finite positive fp32 patterns of bf16 precision */
        uint32_t u;
        if (a < (int)(sizeof edges / sizeof edges[0])) {
            amax[a] = edges[a];
            continue;
        }
        do {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            u = (uint32_t)(rng >> 16) & 0x7fff0000u;
        } while (u >= 0x7f800000u);
        memcpy(&amax[a], &u, 4);
    }
    check_e4m3_pairs("E4m3Divider against x / s", "dev_e4m3_divider", amax, NA, "amax");
}

/* E4m3GivenDivider (kernels/dev/fp8.cuh): for a given scale (any s, any x), the same e4m3 byte as
   the IEEE quotient x / s, for every bf16 and f16 pattern x over scales at the edges of its
   direct range [2^-60, 2^60] and outside it (0, -0, negative, subnormal, inf, NaN, the largest
   finite), and 48 random positive ones over every exponent; the CPU evidence is `make
   check-fp8-div`, part 5. */
static void test_e4m3_given_divider(void **state) {
    enum { NS = 64 };
    static const float edges[] = {0x1p-60f, 0x1.000002p-60f, 0x1.fffffep-61f, 0x1p60f,
                                  0x1.fffffep59f, 0x1.000002p60f, 0.0f, -0.0f, -1.0f, 1e-40f,
                                  INFINITY, NAN, 3.4028235e38f, 1.0f, 1.0f / 448.0f, 3e-3f};
    float scale[NS];
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    int a;
    (void)state;
    for (a = 0; a < NS; a++) {
        uint32_t u;
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        u = (uint32_t)(rng >> 33) % 0x7f800000u;
        if (a < (int)(sizeof edges / sizeof edges[0])) scale[a] = edges[a];
        else memcpy(&scale[a], &u, 4);
    }
    check_e4m3_pairs("E4m3GivenDivider against x / s", "dev_e4m3_given_divider", scale, NS, "scale");
}

/* A kernel over a range of fp32 patterns (a thread a value) that counts the values whose result
   differs from the IEEE one and keeps the first: none may. */
static void run_all_floats(const char *name, const char *kernel) {
    const unsigned zero = 0, none = 0xffffffffu;
    CUdeviceptr differ, first;
    unsigned *got_differ, *got_first;
    void *params[2] = {&differ, &first};
    check c;
    if (!selected(name)) return;
    differ = dev_buf(&zero, sizeof zero);
    first = dev_buf(&none, sizeof none);
    check_begin(&c, name);
    launch(kernel, 4096, 1, 1, 256, 0, params);
    got_differ = (unsigned *)host_from(differ, sizeof zero);
    got_first = (unsigned *)host_from(first, sizeof none);
    check_one(&c, *got_differ == 0, "%u inputs differ, the first 0x%08x", *got_differ, *got_first);
    free(got_differ);
    free(got_first);
    cu.cuMemFree(differ);
    cu.cuMemFree(first);
    check_end(&c);
}
/* e4m3_scale (kernels/dev/fp8.cuh) against max(amax / 448, 2^-126) by the IEEE division, bit
   for bit, for every fp32 amax from +0 to +inf on the device itself (the CPU model's proof is
   `make check-fp8-div`, part 4). */
static void test_e4m3_scale(void **state) {
    (void)state;
    run_all_floats("e4m3_scale against amax / 448", "dev_e4m3_scale_all");
}


/* ---------------------------------------------------------------- main */
int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : getenv("TALON_DEV_CUBIN");
    char err[512] = "", beside[256];
    int failed;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scheduler),     cmocka_unit_test(test_tma_load),
        cmocka_unit_test(test_tma_store),     cmocka_unit_test(test_bulk_copy),
        cmocka_unit_test(test_cp_async_mbar),
        cmocka_unit_test(test_tma_multicast), cmocka_unit_test(test_wgmma_tile),
        cmocka_unit_test(test_gemm_ws),       cmocka_unit_test(test_load_relaxed),
        cmocka_unit_test(test_pipe_skip),     cmocka_unit_test(test_e4m3_divider),
        cmocka_unit_test(test_e4m3_scale),    cmocka_unit_test(test_e4m3_given_divider),
    };
    const char *q = getenv("TALON_TEST_QUICK");
    quick = q && strcmp(q, "0") != 0;
    filter = getenv("TALON_DEV_FILTER");
    if (!path) { /* the cubin make builds beside this program */
        const char *slash = strrchr(argv[0], '/');
        snprintf(beside, sizeof beside, "%.*sdev_kernels.cubin", slash ? (int)(slash - argv[0] + 1) : 0,
                 argv[0]);
        path = beside;
    }
    if (open_driver(err, sizeof err) || load_module(path, err, sizeof err) ||
        talon_ctx_create(&tctx, NULL) != TALON_SUCCESS) {
        if (!err[0]) snprintf(err, sizeof err, "talon_ctx_create: %.480s", talon_last_error());
        fprintf(stderr, "test_gpu_dev: %s (this test needs an sm_90a GPU: H100/H200)\n", err);
        return 1;
    }
    failed = cmocka_run_group_tests_name("talon::dev Hopper primitives", tests, NULL, NULL);
    talon_ctx_destroy(tctx);
    printf("test_gpu_dev: %lld cases, %lld elements checked, %lld failed (%d failed tests)\n", n_cases,
           n_elements, n_failed_elements, failed);
    return failed || n_failed_elements ? 1 : 0;
}
