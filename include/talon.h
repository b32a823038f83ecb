/* talon.h - precompiled CUDA kernels for LLM inference on Hopper (sm_90a), C API.

   WHAT IT IS
   talon ships kernels compiled offline by nvcc to sm_90a cubins (machine code, no PTX),
   embedded in C as byte arrays and loaded at run time through the CUDA Driver API.
   Nothing is compiled at run time; the CUDA runtime (cudart) and NVRTC are not used.
   The driver (libcuda.so.1) is opened with dlopen when the first context is created, so a
   program linked with talon starts on a machine without a driver and gets
   TALON_ERROR_NO_DRIVER instead of a loader failure.

   USING IT (pick one)
   1. Header-only: in exactly one C or C++ file
          #define TALON_IMPLEMENTATION
          #include "talon.h"
      with both include/ and the generated build/include/ (talon_cubins.h) on the include
      path; every other file includes talon.h without the define. Link -ldl -lpthread.
   2. Archive: include talon.h anywhere (never define TALON_IMPLEMENTATION) and link
      build/lib/libtalon.a -ldl -lpthread.
   3. Vendoring: copy include/ and build/include/ (or the release tarball's include/) into
      your tree and use 1.
   Every user compiles against cuda.h (the CU* types; nothing is linked from the toolkit): put
   the toolkit's include directory on the path as a system directory (-isystem; cuda.h is not
   clean under -std=c99 -pedantic -Werror). cuda.h of CUDA 12.4 or newer works.

       CUdevice dev; CUcontext cu;                          // a context current on this thread:
       cuInit(0); cuDeviceGet(&dev, 0);                     // e.g. device 0's primary context
       cuDevicePrimaryCtxRetain(&cu, dev); cuCtxSetCurrent(cu);
       talon_ctx *ctx;
       if (talon_ctx_create(&ctx, NULL) != TALON_SUCCESS)      // binds the current CUcontext
           fprintf(stderr, "talon: %s\n", talon_last_error());
       talon_rmsnorm_args a = {0};
       a.out = y; a.in = x; a.weight = w; a.rows = tokens; a.cols = 4096;
       a.eps = 1e-6f; a.dtype = TALON_DTYPE_BF16;
       talon_status s = talon_rmsnorm(ctx, stream, &a);           // asynchronous on stream
       ...
       talon_ctx_destroy(ctx);

   ERROR MODEL
   Every function returns a talon_status. On failure, talon_last_error() returns a message
   for the calling thread naming the function, the offending argument and its value, or the
   CUresult with the driver's own name and string. The message stays until the next failure
   on that thread. Invalid arguments are detected on the host before anything is launched.
   talon never prints, never exits or aborts, and never allocates or synchronises inside an op.

   THREAD SAFETY
   A talon_ctx may be used from any number of threads at once. Kernels are loaded lazily on
   first use under a per-context lock (each module exactly once), or all at once by
   talon_ctx_preload() / TALON_CTX_PRELOAD. The context's CUcontext must be current on the
   calling thread when an op is called (as with other CUDA libraries).

   CUDA GRAPHS
   Ops are legal inside stream capture: they launch their kernels (one, or a fixed sequence for
   the multi-pass ops, each op says) on the given stream and make no other driver call that
   capture forbids. Loading a module during capture is not
   allowed, so an op whose module is not loaded yet fails with TALON_ERROR_NOT_LOADED while
   its stream is capturing: call talon_ctx_preload() (or create with TALON_CTX_PRELOAD) first.
   Argument structs are read when the op is called; device pointers are baked into the graph.

   WORKSPACES
   An op that needs scratch memory takes it from the caller: args->workspace (device memory,
   16-byte aligned, contents on entry irrelevant) and args->workspace_bytes (bytes available).
   Its size comes from one function per op, all of one shape:
       talon_status talon_<op>_workspace_size(talon_ctx *ctx, const talon_<op>_args *args,
                                              int64_t *bytes);
   which reads only the shape fields of args (each op lists them), may need the context's
   device (its SM count), launches nothing and is thread-safe. A workspace serves one call at
   a time: calls that may overlap (other streams, other graphs replayed concurrently) need
   their own. To serve several shapes (say, one graph captured per batch size), allocate the
   largest size over those shapes: sizes need not grow with the batch.

   REQUIREMENTS
   An sm_90 GPU (H100/H200) and a driver supporting the CUDA version the cubins were built with
   (CUDA 13 needs R580 or newer). cuda.h (CUDA 12.4 or newer) to compile against talon; the
   rest of the toolkit (nvcc) only to build talon's cubins from source.

   LICENSE: Apache-2.0. */
#ifndef TALON_H
#define TALON_H

#include <stddef.h>
#include <stdint.h>
#include <cuda.h>

#define TALON_VERSION_MAJOR 0
#define TALON_VERSION_MINOR 2
#define TALON_VERSION_PATCH 0
#define TALON_VERSION_STRING "0.2.0"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- status codes */
/* X(name, value, description) */
#define TALON_STATUS_LIST(X)                                                                   \
    X(TALON_SUCCESS,                    0, "success")                                          \
    X(TALON_ERROR_INVALID_ARGUMENT,     1, "invalid argument")                                 \
    X(TALON_ERROR_NO_DRIVER,            2, "no CUDA driver (libcuda.so.1) could be loaded")    \
    X(TALON_ERROR_UNSUPPORTED_DEVICE,   3, "device is not sm_90 (H100/H200)")                  \
    X(TALON_ERROR_MODULE_LOAD,          4, "the driver could not load an embedded cubin")      \
    X(TALON_ERROR_NOT_LOADED,           5, "kernel not loaded and the stream is capturing")    \
    X(TALON_ERROR_DRIVER,               6, "a CUDA driver call failed")                        \
    X(TALON_ERROR_OUT_OF_MEMORY,        7, "host memory allocation failed")

typedef enum talon_status {
#define TALON__STATUS_ENUM(name, value, text) name = value,
    TALON_STATUS_LIST(TALON__STATUS_ENUM)
#undef TALON__STATUS_ENUM
    TALON__STATUS_COUNT
} talon_status;

/* Static description of a status code ("unknown status" for values outside the list). */
const char *talon_status_string(talon_status status);

/* Detail of the most recent failure on the calling thread ("" if none). Thread-safe. */
const char *talon_last_error(void);

/* ---------------------------------------------------------------- version and bundle */
/* Run-time version of the compiled dispatcher: compare with TALON_VERSION_* to detect a
   header/archive mismatch. Encoded as major*10000 + minor*100 + patch. */
int talon_version(void);

typedef struct talon_bundle_info {
    const char *version;            /* "0.2.0" */
    const char *git_commit;         /* commit the bundle was built from */
    const char *nvcc_version;       /* e.g. "13.0.88" */
    const char *arch;               /* "sm_90a" */
    int num_images;                 /* embedded cubins */
    int num_kernels;
    const char *const *kernel_names; /* num_kernels symbol names */
} talon_bundle_info;

/* Static description of what was compiled in. Never NULL; needs no GPU or driver. */
const talon_bundle_info *talon_bundle_info_get(void);

/* ---------------------------------------------------------------- context */
typedef struct talon_ctx talon_ctx;

enum {
    TALON_CTX_PRELOAD = 1, /* load every module at create time */
    TALON_CTX_CHECKED = 2  /* kernels check the device-side indices they follow (CHECKED MODE) */
};

typedef struct talon_ctx_options {
    CUcontext context;  /* NULL: the context current on the calling thread */
    unsigned flags;     /* TALON_CTX_PRELOAD | TALON_CTX_CHECKED */
} talon_ctx_options;

/* Creates a context bound to one CUcontext. options may be NULL (all defaults).
   TALON_CTX_CHECKED allocates the checked mode's record: 40 bytes of device memory (cuMemAlloc),
   zeroed on the legacy default stream and waited for; freed by talon_ctx_destroy.
   Errors: INVALID_ARGUMENT (out NULL, unknown flags, no current context), NO_DRIVER,
   UNSUPPORTED_DEVICE (names the device and its sm), MODULE_LOAD (with TALON_CTX_PRELOAD),
   DRIVER (also the record's allocation with TALON_CTX_CHECKED), OUT_OF_MEMORY. Not legal
   during stream capture of the calling thread's streams when TALON_CTX_PRELOAD is given, nor
   while any stream of the CUcontext captures in global mode when TALON_CTX_CHECKED is (the
   legacy stream's memset). Thread-safe. */
talon_status talon_ctx_create(talon_ctx **out, const talon_ctx_options *options);

/* Loads every embedded module now (idempotent). Call before capturing a graph. */
talon_status talon_ctx_preload(talon_ctx *ctx);

/* Unloads the modules and frees the context. NULL is a no-op. The caller guarantees no op is
   running on this ctx from another thread and no launched kernel still needs it. */
void talon_ctx_destroy(talon_ctx *ctx);

/* ---------------------------------------------------------------- checked mode */
/* Device-side indices (page tables, kv_lens, slot_mapping, positions, gather indices, sorted
   token ids) are read by the kernels, never by the host, so no argument check sees them; the
   ops document what the caller guarantees about them. A context created with
   TALON_CTX_CHECKED makes the kernels that follow such indices test each one they use against
   the bound the caller declared in the op's args, and record the first violation in a
   device-side record of the context, which talon_ctx_check reads back. A checked kernel does
   not follow an index that fails its check: it does with the element what the list below
   says, and goes on.
   Off (the default), nothing is allocated and every launch passes the parameters it always
   did (the record pointer 0); the kernels test that one uniform parameter where they would
   check, and do nothing else. The cost, off against the build before checked mode and on
   against off, per family: docs/notes/checked.md.

   The checks (op: the index tensor, the rule a valid entry obeys; what the op does with a bad
   one). Index in the report: the element's position in that tensor, from its start.
     talon_kv_append        slot_mapping[t] < num_pages * page_size. The token is skipped
                            (its cache rows untouched), as without checking. Negative slots
                            are padding (a documented feature): skipped, not a violation.
     talon_rope             positions[t] in [0, max_pos), with a cos_sin_cache only (theta
                            mode takes any position). The token is left unchanged, as without.
     talon_gather_rows      indices[r] in [0, in_rows). The row is written as zeros, as
                            without.
     talon_decode_attention kv_lens[b] in [0, max_kv_len]: clamped into it, as without (index
                            b). page_table entries the kernel reads (those of the keys it
                            attends: the first ceil(L / page_size) of row b, L the clamped
                            kv_lens[b], with a window only the window's pages) in
                            [0, num_pages) when args->num_pages is declared (> 0); else only
                            >= 0 (bound reported: 2^31; a large id is then still followed). A
                            bad entry is not followed: page 0 is read in its place, and o and
                            lse of request b (every head) are NaN. Index: b x the row stride
                            (page_table_stride or its default) + i for entry i of row b.
     talon_prefill_attention_paged  kv_lens[b] in [0, max_kv_len] (clamped, as without;
                            index b); page_table entries of the keys a tile reads (its blocks
                            of keys below the clamped kv_lens[b]; causal masking and the window
                            leave blocks out) in [0, num_pages): such a page reads as zeros, as
                            without (index as decode's).
     talon_moe_gemm         sorted_token_ids[s] in [0, tokens * topk] (tokens * topk is the
                            padding sentinel) where the kernel reads it: a_rows TOKEN or PAIR,
                            d_rows PAIR or topk_weights given, for the blocks with work. A bad
                            id is treated as a padding slot (see the op), as without.
                            num_tokens_post_padded in [0, 128 x min(expert_ids_capacity,
                            floor(sorted_capacity / 128))] (the slots the kernel walks; index
                            0): blocks past those are skipped, as without.
     talon_grouped_gemm     rows_used in [0, rows] (index 0; tiles past rows are not walked,
                            as without); group_rows[g] in [0, rows] (index g; clamped into it,
                            as without).
   Not checked:
     talon_moe_align_block_size's topk_ids and talon_moe_gemm's expert_ids: an id outside
       [0, experts) is expert parallelism's masking (documented there), skipped by design;
     talon_prefill_attention's and prefill_attention_paged's cu_seqlens: their violations read
       zeros or write nothing outside the tensors (see the op), and are not recorded;
     every other op follows no device-side index.
   The first violation only: once recorded, later ones (of any kernel, any stream) are dropped
   until talon_ctx_check clears the record. Which of several concurrent violations is first is
   unspecified. Capture: the record's address is baked into a captured graph, so a graph
   captured on a checked ctx checks at every replay. */
typedef struct talon_check_report {
    int violated;       /* 1: a violation was recorded (the fields describe it); 0: none (all 0) */
    const char *op;     /* the op whose kernel found it, e.g. "talon_decode_attention" */
    const char *kernel; /* that kernel's symbol (talon_bundle_info's kernel_names) */
    const char *what;   /* the index tensor: the args field, e.g. "page_table" */
    const char *rule;   /* what a valid entry is, e.g. "in [0, num_pages)" */
    int64_t index;      /* the entry's position in that tensor */
    int64_t value;      /* the value read there */
    int64_t bound;      /* the declared bound it broke (num_pages, max_kv_len, ...) */
} talon_check_report;

/* Waits for the work of `stream` (0: every stream of the ctx's CUcontext, cuCtxSynchronize),
   then reads the ctx's record into *report and clears it (a later violation is recorded
   again). The record is per ctx: it reports the first violation of any of the ctx's work that
   has finished, whatever its stream (a record a kernel of another stream is still writing is
   waited for). The strings are static. Not an op: it synchronises, so it is not legal
   during stream capture (a capturing `stream` is refused with INVALID_ARGUMENT, nothing
   touched); with stream 0 none of the CUcontext's streams may be capturing in global mode.
   Errors: INVALID_ARGUMENT (report or ctx NULL, a ctx created without TALON_CTX_CHECKED, a
   capturing stream), DRIVER (a failed synchronisation or copy: the driver's error, e.g. a
   kernel that faulted). On error *report is all zero. Thread-safe: concurrent calls on one
   ctx take turns, and each violation is reported once. */
talon_status talon_ctx_check(talon_ctx *ctx, CUstream stream, talon_check_report *report);

/* ---------------------------------------------------------------- ops */
/* Conventions for every op:
   - talon_status talon_<op>(talon_ctx *ctx, CUstream stream, const talon_<op>_args *args);
     stream 0 is the legacy default stream. Launches one kernel (or the sequence the op
     documents), asynchronously; nothing is read back to the host.
   - Device pointers are CUdeviceptr; sizes int64_t; strides are row strides in elements, and
     0 means contiguous (the row length). Tensors are row-major.
   - Math is fp32; inputs and outputs share dtype. Outputs must not overlap inputs unless the
     op says so.
   - A 16-byte vector path is used when every pointer is 16-byte aligned and cols and every
     stride are multiples of 8; otherwise an element-wise path handles any shape. Pointers
     must be aligned to the element size (2 bytes). */

/* SIZE LIMITS
   The kernels compute every element offset in 64 bits (a row's or token's base once, 32 bits
   within it), so any tensor may pass 2^31 elements or bytes within its op's limits
   (tests/core/test_gpu_limits.c runs every op once with offsets past 2^31). What bounds the
   sizes is the launch grid (at most 2^31 - 1 blocks), TMA tensor maps (int32 coordinates,
   dimensions up to 2^32, strides below 2^40 bytes) and the int32 positions, page ids and
   32-bit cache rows of the attention kernels. Per op (sizes in elements; Hq, Hk: query and
   kv heads; v: elements per access, 8 on the 16-byte path, else 1; each op's comment has the
   details):
     rmsnorm, fused_add_rmsnorm,   rows < 2^31 (a block per row); cols < 2^62
       layernorm, rmsnorm_quant_fp8
     silu_and_mul, gelu_and_mul    rows < 2^31; grid rows x ceil(cols / (256 v)) < 2^31
     moe_router_topk               tokens <= 65536, experts <= 512, k <= 16
     topk                          rows <= 1024, cols <= 262144, k <= 1024
     moe_align_block_size          tokens <= 65536, k <= 64, experts <= 512; capacities < 2^31
     moe_sum                       tokens, hidden < 2^31, k <= 64; grid
                                   tokens x ceil(hidden / (256 v r)) < 2^31 (r: the op's)
     rope                          tokens < 2^31, heads <= 2^20 each, head_dim <= 1024; its
                                   threads < 2^31
     kv_append                     tokens < 2^31, Hk <= 2^20, head_dim <= 1024;
                                   tokens x 2 Hk head_dim / v < 2^31 - 256; a cache < 2^62
     gather_rows                   rows < 2^31; in_rows, cols and each span < 2^59; grid
                                   rows x ceil(row bytes / 4096) (else cols / 256) < 2^31
     decode_attention              batch <= 2^24, heads <= 1024, max_kv_len <= 2^30,
                                   num_pages < 2^31; a cache < 2^32 rows of head_dim (32-bit
                                   row index); CTAs batch x Hk x ceil(group / h) < 2^31 (h:
                                   talon_decode_attention); with splits, merge blocks
                                   batch x Hq x head_dim / 128 < 2^31
     merge_attention_states        rows < 2^22, head_dim <= 4096
     prefill_attention             total_q, total_kv < 2^31 (TMA rows), batch <= 2^20,
                                   strides <= 2^31; tiles ceil(max_seqlen_q / 128) x batch x
                                   Hq < 2^31; max_seqlen_q + total_kv <= 2^31 - 256 (int32
                                   positions)
     prefill_attention_paged       as prefill_attention with max_kv_len (<= 2^30) for total_kv;
                                   num_pages < 2^31, a cache < 2^32 rows of head_dim
     gemm                          m <= 2^24; n, k <= 2^20; strides <= 2^36
     quant_fp8                     rows < 2^31, cols <= 2^24; group scales span <= 2^60
     moe_gemm                      tokens <= 65536, topk <= 64, experts <= 512; n, k <= 2^20;
                                   strides <= 2^36; sorted_capacity < 2^31, expert_ids_capacity
                                   <= 2^24; one expert's b below 2^40 bytes (a TMA stride)
     grouped_gemm                  groups <= 65536; rows < 2^31 (MASKED: <= 2^20 per group,
                                   groups x rows < 2^31); n, k, strides as moe_gemm */

typedef enum talon_dtype {
    TALON_DTYPE_BF16 = 0,   /* zero-initialised args mean bf16 */
    TALON_DTYPE_F16 = 1,
    TALON_DTYPE_F32 = 2,    /* where an op says so (logits, scores); the norms reject it */
    TALON_DTYPE_I32 = 3,    /* index tensors; no op takes it as its data type */
    TALON_DTYPE_FP8_E4M3 = 4 /* where an op says so (KV caches, GEMM inputs) */
} talon_dtype;

/* out[r, :] = in[r, :] * rsqrt(mean(in[r, :]^2) + eps) * weight
   in, out: [rows, cols] (out may equal in with the same stride); weight: [cols].
   rows in [1, 2^31-1], cols >= 1. */
typedef struct talon_rmsnorm_args {
    CUdeviceptr out, in, weight;
    int64_t rows, cols;
    int64_t out_stride, in_stride;  /* 0: cols */
    float eps;
    talon_dtype dtype;
} talon_rmsnorm_args;
talon_status talon_rmsnorm(talon_ctx *ctx, CUstream stream, const talon_rmsnorm_args *args);

/* In place (vLLM/FlashInfer semantics):
     residual[r, :] = round(residual[r, :] + in[r, :])
     in[r, :]       = rmsnorm(residual[r, :]) * weight
   The norm is computed from the rounded residual, so it equals talon_rmsnorm of it. */
typedef struct talon_fused_add_rmsnorm_args {
    CUdeviceptr in, residual, weight;
    int64_t rows, cols;
    int64_t in_stride, residual_stride; /* 0: cols */
    float eps;
    talon_dtype dtype;
} talon_fused_add_rmsnorm_args;
talon_status talon_fused_add_rmsnorm(talon_ctx *ctx, CUstream stream,
                                     const talon_fused_add_rmsnorm_args *args);

/* out[r, :] = (in[r, :] - mean) * rsqrt(var + eps) * weight + bias   (biased variance)
   bias 0 means none. Shapes and aliasing as rmsnorm. */
typedef struct talon_layernorm_args {
    CUdeviceptr out, in, weight, bias;
    int64_t rows, cols;
    int64_t out_stride, in_stride;
    float eps;
    talon_dtype dtype;
} talon_layernorm_args;
talon_status talon_layernorm(talon_ctx *ctx, CUstream stream, const talon_layernorm_args *args);

/* Gated activations: in [rows, 2*cols], out [rows, cols]
     out[r, j] = act(in[r, j]) * in[r, cols + j]
   silu(x) = x / (1 + exp(-x)); gelu erf: 0.5 x (1 + erf(x / sqrt 2));
   gelu tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). In fp32, rounded once to the
   output type; erf is approximated within 1.5e-7 (Abramowitz-Stegun 7.1.26), as in
   talon_gemm's GELU epilogue. silu and gelu erf flush values below 2^-126 in magnitude (in
   their exp and reciprocal) to zero, here and in talon_gemm's epilogues.
   rows * ceil(cols / 2048) (vector path) or rows * ceil(cols / 256) must be < 2^31. */
typedef struct talon_silu_and_mul_args {
    CUdeviceptr out, in;
    int64_t rows, cols;             /* cols of out; in has 2*cols */
    int64_t out_stride, in_stride;  /* 0: cols and 2*cols */
    talon_dtype dtype;
} talon_silu_and_mul_args;
talon_status talon_silu_and_mul(talon_ctx *ctx, CUstream stream,
                                const talon_silu_and_mul_args *args);

typedef enum talon_gelu_approx { TALON_GELU_ERF = 0, TALON_GELU_TANH = 1 } talon_gelu_approx;

typedef struct talon_gelu_and_mul_args {
    CUdeviceptr out, in;
    int64_t rows, cols;
    int64_t out_stride, in_stride;
    talon_dtype dtype;
    talon_gelu_approx approx;
} talon_gelu_and_mul_args;
talon_status talon_gelu_and_mul(talon_ctx *ctx, CUstream stream,
                                const talon_gelu_and_mul_args *args);

/* ---------------------------------------------------------------- MoE routing */
/* talon_moe_router_topk: the k best experts of each token and their weights, one kernel.
     logits [tokens, experts] (bf16, f16 or f32; row stride logits_stride)
       -> topk_ids [tokens, k] int32 and topk_weights [tokens, k] fp32, both contiguous.
   Scores, in fp32 over the raw logits x of a row (the bias never enters them):
     softmax (default): p_e = exp(x_e - max x) / sum_j exp(x_j - max x), over all experts;
     sigmoid:           p_e = 1 / (1 + exp(-x_e)).
   Ranking: without correction_bias, experts are ranked by their logit (both scorings grow
   with it; ranking the logit itself avoids ties that rounding the score would create). With
   correction_bias (fp32 [experts], DeepSeek-V3 style) by p_e + bias[e] in fp32; the bias is
   used for the selection only, never in the returned weights. NaN ranks above +inf, -0 equals
   +0, and equal keys go to the lower expert index. The k outputs of a token are in rank order
   (best first); topk_weights[t, j] is the score of expert topk_ids[t, j], divided by the sum
   of the k scores when renormalize is 1.
   Reproducible ids: with a bias the keys depend on the scores, so these are then computed by
   a fixed sequence of correctly rounded fp32 operations (an exp of talon's own, the softmax
   sum in 53-bit fixed point, whose value does not depend on the order of addition), and
   tests/router/ref_router.c re-derives every id on the CPU, as it does from the logits without one.
   Unbiased softmax weights use the hardware exp and an fp32 sum. Weights are within 32 fp32
   ulp of the exact values; the same inputs give the same outputs on a given GPU.
   Non-finite logits (weights as torch.softmax / torch.sigmoid give them in fp32):
     softmax: a row holding NaN or +inf, or whose logits are all -inf, has NaN weights (all k);
       other -inf logits get weight 0. With a bias such a row's keys are all NaN, so it
       selects experts 0..k-1.
     sigmoid: NaN gives a NaN weight, +inf 1, -inf 0.
     renormalize: k weights with a NaN, or summing to 0 (sigmoid of -inf logits), give NaN.
   Limits: tokens in [1, 65536], experts in [1, 512], k in [1, 16] and k <= experts.
   Pointers: logits aligned to its element, the others to 4 bytes; logits 16-byte aligned
   with experts and the stride multiples of 16 bytes take the 16-byte load path (faster).
   Outputs must not overlap the inputs. */
typedef enum talon_router_scoring {
    TALON_ROUTER_SOFTMAX = 0,
    TALON_ROUTER_SIGMOID = 1
} talon_router_scoring;

typedef struct talon_moe_router_topk_args {
    CUdeviceptr topk_weights;       /* out: fp32 [tokens, k] */
    CUdeviceptr topk_ids;           /* out: int32 [tokens, k] */
    CUdeviceptr logits;             /* [tokens, experts] of logits_dtype */
    CUdeviceptr correction_bias;    /* fp32 [experts]; 0: none */
    int64_t tokens, experts, k;
    int64_t logits_stride;          /* elements between rows; 0: experts */
    talon_dtype logits_dtype;       /* BF16 (0), F16 or F32 */
    talon_router_scoring scoring;   /* TALON_ROUTER_SOFTMAX (0) or TALON_ROUTER_SIGMOID */
    int renormalize;                /* 1: weights divided by their sum over the k; 0: not */
} talon_moe_router_topk_args;
talon_status talon_moe_router_topk(talon_ctx *ctx, CUstream stream,
                                   const talon_moe_router_topk_args *args);

/* ---------------------------------------------------------------- top-k */
/* Per-row top-k: for each row r of in[rows, cols], the k largest values and their column
   indices:  out_values[r, j] = in[r, out_indices[r, j]],  j < k.
     dtype: TALON_DTYPE_F32, BF16 or F16 (in and out_values); out_indices is int32.
     cols in [1, 262144], k in [1, min(cols, 1024)], rows in [1, 1024].
     in_stride: elements between rows of in (0: cols; otherwise >= cols). out_values and
       out_indices are contiguous [rows, k].
   Order: values compare as numbers, except that every NaN (either sign, any payload) ranks
   above +inf, and -0.0 equals +0.0. Among equal values (and among NaNs) the lower index wins:
   the set returned is exactly determined (no randomness at the k-th value). Against
   torch.topk: the same values (torch also ranks NaN above +inf; where values tie at the k-th
   place torch may return other indices of them, it documents no tie order). Sorted output is
   descending in both, but talon puts every NaN first, in ascending index order, while torch
   may place some NaNs elsewhere in the row (seen: V=1000, k=50, 5 NaNs and one +inf, the NaNs
   at positions 0, 1, 2, 48, 49), and equal values come in index order in talon only. Values are
   copied bit for bit from the input (NaN payloads and the sign of zero are kept).
   sorted = 1: each output row is in descending order, equal values by ascending index;
   sorted = 0: the same set of k entries in an unspecified order (it may differ between calls).
     It is rarely faster: the k are placed in order as they are selected, except where many
     values near the k-th lie close together (ties, or an inf or NaN in the row stretching the
     range they are placed in); then a sort runs, for sorted = 1 only.
   workspace, workspace_bytes: at least talon_topk_workspace_size's bytes (see WORKSPACES).
   Pointers must be aligned to their element (4 bytes for fp32 and indices, 2 for bf16/f16).
   Launches a fixed sequence of two kernels chosen from rows and cols alone: for small problems
   (rows x ceil(cols / 4096) <= 2048: B <= 64 at cols 128256, B <= 32 at 262144) chunk
   histograms, then select (the row read twice); else a threshold from a sample of each row
   (8192 elements), then select (the row read once), launched as a programmatic dependent of
   the sample kernel (cuLaunchKernelEx; captured graphs keep the edge): its first blocks
   prefetch their part of the row into L2 while the sample runs and wait for its threshold on
   the GPU. A row whose sample misleads (fewer than k keys reach the threshold, or more than
   4096 do: sorted rows, many equal values) is still answered exactly, by one block re-reading
   that row a few times: slower, same result.
   Errors (INVALID_ARGUMENT, nothing launched): any size out of range, k > cols, in_stride
   < cols, a NULL or misaligned pointer, workspace_bytes smaller than needed, sorted not 0/1,
   an unsupported dtype. */
typedef struct talon_topk_args {
    CUdeviceptr out_values, out_indices, in;
    CUdeviceptr workspace;
    int64_t workspace_bytes;
    int64_t rows, cols, k;
    int64_t in_stride;  /* 0: cols */
    int sorted;         /* 1: descending; 0: unsorted */
    talon_dtype dtype;
} talon_topk_args;

/* Workspace bytes talon_topk needs for these args (only rows and cols are read): at most 33 KB
   per row, except on the chunk path: up to 288 KB per row, at most 8 MB of chunk histograms in
   all. The same on every device. Errors (INVALID_ARGUMENT): NULL ctx, args or bytes, rows or
   cols out of range. Thread-safe. */
talon_status talon_topk_workspace_size(talon_ctx *ctx, const talon_topk_args *args,
                                       int64_t *bytes);
talon_status talon_topk(talon_ctx *ctx, CUstream stream, const talon_topk_args *args);

/* ---------------------------------------------------------------- mixture of experts */
/* vLLM's moe_align_block_size: groups the (token, slot) pairs of a top-k routing by expert,
   each expert's group padded to a multiple of block_size, for a grouped GEMM that takes one
   block_size-row tile per expert block.
     topk_ids: int32 [tokens, k]; flat index f = t * k + j names the pair (token t, slot j).
     Ids outside [0, experts) (e.g. -1 from expert-parallel masking) are skipped: not counted,
     not placed, as if the pair did not exist.
   Outputs, with n_e = number of valid pairs of expert e, P_e = round_up(n_e, block_size),
   S_e = P_0 + ... + P_{e-1} (experts with no pair take no block), sentinel = tokens * k:
     num_tokens_post_padded: int32 [1] = S_experts (a multiple of block_size, 0 when no id is
       valid).
     sorted_token_ids: int32 [sorted_capacity]: [S_e, S_e + n_e) holds expert e's flat indices
       in ASCENDING order, [S_e + n_e, S_e + P_e) the sentinel, and every slot from
       num_tokens_post_padded to sorted_capacity the sentinel too (the whole buffer is written,
       as vLLM does). vLLM leaves the order inside a group unspecified (atomics); talon's is
       deterministic and sorted, so it is one of vLLM's valid outputs.
     expert_ids: int32 [expert_ids_capacity]: block b < num_tokens_post_padded / block_size holds
       the expert whose group contains slot b * block_size; every later block holds -1 (vLLM
       writes 0 there; -1 lets a consumer sized by the capacity skip them).
   Capacities are in elements (at most 2^31 - 1) and must cover the worst case for the
   shape, from talon_moe_align_block_size_capacity:
     sorted >= tokens * k + min(experts, tokens * k) * (block_size - 1)
     expert_ids >= ceil(sorted / block_size)   (with `sorted` the minimum above)
   vLLM's own sizes (tokens * k + experts * (block_size - 1), and its block count) satisfy both.
   Limits: tokens in [1, 65536], k in [1, 64], experts in [1, 512], block_size a power of two
   in [1, 1024]; pointers 4-byte aligned; outputs must not overlap topk_ids or each other.
   One kernel, device-side only (no counts go through the host): tokens * k <= 2048 runs as
   blocks of 512 threads, one per 2048 slots of sorted_capacity (at most 64), each ranking all
   the ids and writing its slice of both outputs; <= 131072 on a cluster of 8 such blocks,
   larger problems on a cluster of 8 blocks of 1024 threads; a cluster shares its counts
   through distributed shared memory. No workspace. */
typedef struct talon_moe_align_block_size_args {
    CUdeviceptr sorted_token_ids, expert_ids, num_tokens_post_padded; /* int32 outputs */
    CUdeviceptr topk_ids;                                             /* int32 [tokens, k] */
    int64_t tokens, k, experts, block_size;
    int64_t sorted_capacity, expert_ids_capacity; /* elements of the two output buffers */
} talon_moe_align_block_size_args;
talon_status talon_moe_align_block_size(talon_ctx *ctx, CUstream stream,
                                        const talon_moe_align_block_size_args *args);

/* The minimum capacities above, in elements, for a shape (validated as the op does).
   Either output pointer may be NULL. Needs no context, GPU or driver. */
talon_status talon_moe_align_block_size_capacity(int64_t tokens, int64_t k, int64_t experts,
                                                 int64_t block_size, int64_t *sorted_capacity,
                                                 int64_t *expert_ids_capacity);

/* Combines the k expert outputs of each token:
     out[t, :] = sum_j weights[t, j] * in[t, j, :]     (weights 0: plain sum, weight 1)
   in: [tokens, k, hidden] contiguous; out: [tokens, hidden] contiguous; weights: fp32
   [tokens, k] contiguous (as the routers produce them), 4-byte aligned. bf16/f16 in and out,
   fp32 accumulation in order j = 0 .. k-1, one rounding. tokens >= 1, k in [1, 64],
   hidden >= 1; the grid (tokens * ceil(hidden / (2048 r)) blocks on the 16-byte path, where
   r = 4 for k <= 2, 2 for k <= 4, else 1; else tokens * ceil(hidden / 256)) must stay below
   2^31. */
typedef struct talon_moe_sum_args {
    CUdeviceptr out, in, weights;
    int64_t tokens, k, hidden;
    talon_dtype dtype;
} talon_moe_sum_args;
talon_status talon_moe_sum(talon_ctx *ctx, CUstream stream, const talon_moe_sum_args *args);

/* ---------------------------------------------------------------- rotary embedding, KV cache */
/* Rotary position embedding, in place on q [tokens, Hq, D] and k [tokens, Hk, D].
   Token t has position p = positions[t]; each head's first rot_dim elements are rotated in
   rot_dim/2 pairs (x, y), pair i by the angle p * inv_freq_i:
       x' = x cos - y sin,   y' = y cos + x sin
   NeoX style (TALON_ROPE_NEOX): pair i = elements (i, i + rot_dim/2);
   GPT-J style (TALON_ROPE_GPTJ): pair i = elements (2i, 2i + 1).
   Elements rot_dim..D-1 of a head are neither read nor written (partial rotary).
   cos and sin come from either
   - cos_sin_cache: fp32 [max_pos, rot_dim], row p = cos of pairs 0..rot_dim/2-1, then their
     sin (vLLM's layout). A token whose position is outside [0, max_pos) is left unchanged
     (never read out of bounds; a checked ctx records it: CHECKED MODE); or
   - theta (cos_sin_cache 0): inv_freq_i = theta^(-2i/rot_dim) and the angle p * inv_freq_i are
     computed in fp64 and reduced mod 2 pi there, then fast fp32 cos/sin (absolute error
     < 2^-21): the angle is off by less than 1e-14 |p| + 2e-7 rad (every int32/int64 position
     is valid, negative ones too). theta 0 means 10000. An fp32 angle (how vLLM builds its
     cache) is off by up to about 1e-7 |p| rad: results differ from such a cache by that much
     at large positions.
   Layout: heads are contiguous D elements inside a token; q_stride / k_stride are elements
   between tokens (0: Hq*D resp. Hk*D), so q and k may be views into one fused qkv buffer (the
   v part and any padding are untouched); q and k must not overlap. k 0 rotates q only
   (num_kv_heads must be 0 then).
   Math is fp32 (angles as above), one rounding per element.
   Limits: 2 <= rot_dim <= D <= 1024, rot_dim even (0: D); positions int32 or int64
   (positions_dtype); tokens * g * rot_dim / 2 / v < 2^31 threads, v = 8 (NeoX) or 4 (GPT-J)
   pairs per thread on the 16-byte path, 1 otherwise, g = ceil((Hq + Hk) / 2) heads per
   thread, or Hq + Hk on the NeoX 16-byte path with a cos_sin_cache (one head per thread).
   A 16-byte path is used when q, k are 16-byte aligned, the strides and D are multiples of 8,
   rot_dim is a multiple of 16 (NeoX) or 8 (GPT-J) and the cache (if any) is 16-byte aligned;
   otherwise an element-wise path handles any layout. Positions must be aligned to their type,
   the cache to 4 bytes, q and k to 2. One kernel. */
typedef enum talon_rope_style { TALON_ROPE_NEOX = 0, TALON_ROPE_GPTJ = 1 } talon_rope_style;
typedef enum talon_index_dtype { TALON_INDEX_I32 = 0, TALON_INDEX_I64 = 1 } talon_index_dtype;

typedef struct talon_rope_args {
    CUdeviceptr q, k;               /* in place; k 0: q only */
    CUdeviceptr positions;          /* [tokens], positions_dtype */
    CUdeviceptr cos_sin_cache;      /* fp32 [max_pos, rot_dim], or 0: use theta */
    int64_t tokens, num_q_heads, num_kv_heads, head_dim;
    int64_t rot_dim;                /* 0: head_dim */
    int64_t q_stride, k_stride;     /* elements between tokens; 0: heads * head_dim */
    int64_t max_pos;                /* rows of cos_sin_cache (ignored without it) */
    float theta;                    /* without cos_sin_cache; 0: 10000 */
    talon_dtype dtype;              /* q and k: BF16 or F16 */
    talon_index_dtype positions_dtype; /* 0: int32 */
    talon_rope_style style;         /* 0: NeoX */
} talon_rope_args;
talon_status talon_rope(talon_ctx *ctx, CUstream stream, const talon_rope_args *args);

/* Writes new keys and values into a paged KV cache:
       k_cache[slot_mapping[t], h, d] = k[t, h, d],  v_cache[...] = v[t, h, d]
   for every token t whose slot is in [0, num_pages * page_size); a negative slot (padding) or
   one past the end skips the token, leaving its cache rows untouched (a checked ctx records
   one past the end: CHECKED MODE).
   Cache layout (layout, shared with talon_decode_attention): K and V are two separate
   contiguous tensors, slot s = page * page_size + offset, each
       TALON_KV_NHD (0): [num_pages, page_size, Hk, D], element (s, h, d) at
                         ((page * page_size + offset) * Hk + h) * D + d
       TALON_KV_HND (1): [num_pages, Hk, page_size, D], element (s, h, d) at
                         ((page * Hk + h) * page_size + offset) * D + d
   (HND keeps a head's rows of a page together: page_size * D contiguous elements).
   Element type of the cache (cache_dtype): the input dtype itself, or TALON_DTYPE_FP8_E4M3:
       stored = e4m3(x / k_scale) (resp. v_scale), the fp32 quotient rounded to nearest even
       and saturated to +-448 (as __nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3); NaN
       stays NaN); read it back as fp8 * scale.
   Scales are fp32 by value, used only for an fp8 cache; 0 means 1.0; otherwise > 0 and finite.
   Zero-initialised args are a bf16 input and bf16 cache: an f16 caller sets dtype and
   cache_dtype to F16 (a cache dtype that is neither the input dtype nor fp8 is an error).
   k and v may be views (k_stride / v_stride elements between tokens; 0: Hk*D). The cache
   pointers are aligned to their element, k and v to 2 bytes, slot_mapping to 8. A 16-byte path
   is used when k, v and the caches are 16-byte aligned and Hk*D and the strides are multiples
   of 8 (and D, for HND); otherwise an element-wise path. page_size is a power of two. Two
   slots of one call that are equal race (either value may land); the inputs must not overlap
   the caches.
   Limit: tokens * 2 * Hk * D / v < 2^31 - 256 (v = 8 on the 16-byte path, else 1). One
   kernel. */
typedef enum talon_kv_layout { TALON_KV_NHD = 0, TALON_KV_HND = 1 } talon_kv_layout;

typedef struct talon_kv_append_args {
    CUdeviceptr k_cache, v_cache;   /* [num_pages, page_size, Hk, D] (layout), cache_dtype */
    CUdeviceptr k, v;               /* [tokens, Hk, D], dtype */
    CUdeviceptr slot_mapping;       /* int64 [tokens]; negative: skip */
    int64_t tokens, num_kv_heads, head_dim;
    int64_t num_pages, page_size;
    int64_t k_stride, v_stride;     /* elements between tokens; 0: Hk * D */
    float k_scale, v_scale;         /* fp8 cache only; 0: 1.0 */
    talon_dtype dtype;              /* k and v: BF16 or F16 */
    talon_dtype cache_dtype;        /* dtype, or TALON_DTYPE_FP8_E4M3 */
    talon_kv_layout layout;         /* 0: NHD */
} talon_kv_append_args;
talon_status talon_kv_append(talon_ctx *ctx, CUstream stream, const talon_kv_append_args *args);

/* ---------------------------------------------------------------- row gather (embeddings) */
/* out[r, :] = in[indices[r], :] for r < rows: the token-embedding lookup (in = the embedding
   table [vocab, hidden], indices = the token ids), or any selection of rows (say the last
   position of each prompt before the LM head). Rows are copied bit for bit; a row whose index
   is outside [0, in_rows) is written as zeros (in is never read outside its in_rows rows; a
   checked ctx records the index: CHECKED MODE).
     in: [in_rows, cols] with row stride in_stride; out: [rows, cols] with row stride
     out_stride (elements; 0: cols); indices: [rows] int32 or int64 (index_dtype), read on the
     device (a captured graph follows whatever ids the buffer holds at replay).
     dtype: BF16, F16, F32 or FP8_E4M3 (only the element size matters: any 1-, 2- or 4-byte
     data may be gathered under one of them).
   Limits: rows in [1, 2^31-1], in_rows and cols >= 1, rows x ceil(row bytes / 4096) (16-byte
   path) or rows x ceil(cols / 256) below 2^31. Pointers aligned to their element (indices to
   its type); a 16-byte path when in and out are 16-byte aligned and the row and both strides
   are multiples of 16 bytes. out must not overlap in or indices.
   Errors (INVALID_ARGUMENT, nothing launched): NULL or misaligned pointers, sizes or strides
   out of range, an unsupported dtype or index_dtype, overlaps. One kernel; thread-safe;
   legal inside stream capture (after preload). */
typedef struct talon_gather_rows_args {
    CUdeviceptr out;                /* [rows, cols] */
    CUdeviceptr in;                 /* [in_rows, cols] */
    CUdeviceptr indices;            /* [rows], index_dtype */
    int64_t rows, cols, in_rows;
    int64_t out_stride, in_stride;  /* elements; 0: cols */
    talon_dtype dtype;              /* BF16 (0), F16, F32 or FP8_E4M3 */
    talon_index_dtype index_dtype;  /* 0: int32 */
} talon_gather_rows_args;
talon_status talon_gather_rows(talon_ctx *ctx, CUstream stream, const talon_gather_rows_args *args);

/* ---------------------------------------------------------------- attention (decode) */
/* Paged KV cache (shared with kv_append): K and V are two tensors, each row-major and
   contiguous in `layout`: [num_pages, page_size, num_kv_heads, head_dim] (TALON_KV_NHD, 0) or
   [num_pages, num_kv_heads, page_size, head_dim] (TALON_KV_HND); token slot
   s = page * page_size + offset (see talon_kv_append for the element addresses). The cache
   holds dtype (bf16/f16, as q) or TALON_DTYPE_FP8_E4M3 with per-tensor scales (real value =
   fp8 value * scale). Request b's token t lives in page
   page_table[b * page_table_stride + t / page_size] at offset t % page_size.

   talon_decode_attention: one query token per request (flash-decoding).
     o[b, h, :] = sum_t softmax_t(score(b, h, t)) * V[b, t, h / (Hq / Hk), :]
     score = soft_cap(sm_scale * q[b, h, :] . K[b, t, h / (Hq / Hk), :])
     soft_cap(x) = cap * tanh(x / cap) when logits_soft_cap = cap > 0, else x; applied before
     the window mask and the softmax (Gemma-2).
     t runs over the last `window` keys, [max(0, L - window), L) with L = kv_lens[b]
     (window 0: all L keys).
     lse[b, h] = ln(sum_t exp(score(b, h, t))): NATURAL log of the sum over the attended keys,
     fp32; a request with no key (kv_lens[b] = 0) gets o = 0 and lse = -inf.
   Shapes: q, o [batch, num_qo_heads, head_dim] contiguous; lse fp32 [batch, num_qo_heads];
   page_table int32 [batch, page_table_stride]; kv_lens int32 [batch] on the device.
   num_qo_heads a multiple of num_kv_heads (MHA, GQA, MQA); head_dim 64, 128 or 256;
   page_size a power of two in [1, 256].
   Caller guarantees (device data cannot be checked on the host): 0 <= kv_lens[b] <= max_kv_len
   (the kernel clamps to [0, max_kv_len], so a violation gives wrong results but no read past
   the page table row); page ids of the first ceil(kv_lens[b] / page_size) entries of each row
   are valid pages of the caches. Later entries are never read. Each cache holds fewer than
   2^32 rows of head_dim elements (pages * page_size * num_kv_heads; at the smallest row, 64
   bytes, that is 256 GiB, so any cache that fits in a GPU's memory; checked on the host when
   num_pages is given). A checked ctx (TALON_CTX_CHECKED) tests kv_lens and the page ids read
   (against num_pages when given) and records the first bad one: CHECKED MODE.
   Split-KV: each (request, kv head) is split over `splits` CTAs, each taking an equal share
   of that request's attended keys; the partial (o, lse) go to the workspace and a merge kernel
   writes o and lse (one kernel, no workspace, when splits = 1). The split count depends only
   on host values: batch, num_kv_heads, heads per CTA and max_kv_len, and the device's SM
   count S, read when the context was created (132 on H100 SXM / H200; the count changes the
   speed, never the result; the figures in brackets are for 132):
     ctas = batch * num_kv_heads * ceil(group / h)        (group = num_qo_heads / num_kv_heads;
                                                           h = 8 at head_dim <= 128, else 4)
     slots = 4 S                                          (4 resident CTAs per SM: 528)
     cost(s) = ceil(ctas * s / slots) / s                 (waves of CTAs doing 1/s of the work)
     splits = 1 when 1.5 S < ctas <= slots                (more than 1.5 CTAs per SM: 198)
     else s0 = the smallest s in [1, min(256, ceil(max_kv_len / 1024))] with the least
       cost(s); when ctas * s0 <= 1.5 S (at most 1.5 CTAs per SM) it is raised to
       min(ceil(2 S / ctas), ceil(max_kv_len / 128), 256) if that is larger (2 per SM: 264)
   or num_splits when given. The workspace size therefore depends on the context's device:
   size it with the ctx that will run the op. kv_lens is not read on the host, so a graph
   captured with a max_kv_len bound stays valid for any kv_lens <= that bound. Kernels: the attention kernel (grid batch * num_kv_heads *
   ceil(group / h) x splits), then the merge kernel when splits > 1, launched as a
   programmatic dependent of the first (cuLaunchKernelEx): it starts while the attention
   kernel drains and waits for its partials on the GPU (captured graphs keep that edge). The
   attention kernel allows dependents to launch as it starts (griddepcontrol.launch_dependents),
   so a kernel of yours launched right after a one-split call with programmatic stream
   serialization must wait (griddepcontrol.wait) before it reads o or lse, as PDL requires.
   Precision: fp32 scores, online softmax in fp32 (exp2 with log2(e) folded into the scale),
   fp32 accumulation, o rounded once (head_dim <= 128 with 2 to 8 heads per CTA, or any with
   an fp8 cache, uses tensor cores: the weights enter P V as two 16-bit parts, ~16 significant
   bits; with an fp8 cache they are f16 and q enters as f16 scaled by a power of two, exact
   for bf16 q of any range except elements over 2^31 times smaller than the largest |q| of
   the CTA's heads).
   fp8: k_scale is folded into q and v_scale into o.
   Query groups larger than h heads are split over ceil(group / h) CTAs sharing the K/V reads
   through L2. */
typedef struct talon_decode_attention_args {
    CUdeviceptr o;              /* out: [batch, num_qo_heads, head_dim], dtype */
    CUdeviceptr lse;            /* out, optional (0: none): fp32 [batch, num_qo_heads] */
    CUdeviceptr q;              /* [batch, num_qo_heads, head_dim], dtype */
    CUdeviceptr k_cache, v_cache; /* [num_pages, page_size, Hk, head_dim] (layout), kv_dtype */
    CUdeviceptr page_table;     /* int32 [batch, page_table_stride] */
    CUdeviceptr kv_lens;        /* int32 [batch] */
    CUdeviceptr workspace;      /* 16-byte aligned; may be 0 when the workspace size is 0 */
    int64_t workspace_bytes;    /* bytes available at workspace */
    int64_t batch;              /* [1, 2^24] */
    int64_t num_qo_heads, num_kv_heads; /* [1, 1024]; num_qo_heads % num_kv_heads == 0 */
    int64_t head_dim;           /* 64, 128, 256 */
    int64_t page_size;          /* power of two in [1, 256] */
    int64_t num_pages;          /* pages in each cache, optional: 0 (not declared) or [1, 2^31-1];
                                   checked mode tests page ids against it (CHECKED MODE) */
    int64_t page_table_stride;  /* int32 elements between rows; 0: ceil(max_kv_len / page_size) */
    int64_t max_kv_len;         /* [1, 2^30]: bound on every kv_lens[b]; decides the split */
    int64_t window;             /* sliding window in keys; 0: all keys */
    int64_t num_splits;         /* 0: automatic (above); else forced, [1, 256] */
    float sm_scale;             /* 0: 1 / sqrt(head_dim); must be finite */
    float logits_soft_cap;      /* 0: off; else > 0 and finite */
    float k_scale, v_scale;     /* fp8 caches only: finite and > 0 (ignored otherwise) */
    talon_dtype dtype;          /* q and o: bf16 or f16 */
    talon_dtype kv_dtype;       /* the caches: dtype, or TALON_DTYPE_FP8_E4M3 */
    talon_kv_layout layout;     /* the caches' layout; 0: NHD */
} talon_decode_attention_args;

/* Workspace bytes talon_decode_attention needs for these args (only the shape fields are
   read: batch, heads, head_dim, page_size, page_table_stride, max_kv_len, window, num_splits,
   dtype, kv_dtype): splits * batch * num_qo_heads * (head_dim + 1) * 4 bytes rounded up to 16,
   or 0 when one split suffices. Errors as talon_decode_attention's shape checks. Thread-safe. */
talon_status talon_decode_attention_workspace_size(talon_ctx *ctx,
                                                   const talon_decode_attention_args *args,
                                                   int64_t *bytes);

/* Errors (INVALID_ARGUMENT, nothing launched): NULL pointers (lse and a zero-size workspace
   may be 0), pointers not 16-byte aligned (q, o, caches, workspace) or 4-byte aligned (lse,
   page_table, kv_lens), shapes out of range, num_qo_heads not a multiple of num_kv_heads,
   page_table_stride < ceil(max_kv_len / page_size), workspace_bytes too small, bad scales,
   num_pages negative or over 2^31-1, or making a cache of 2^32 rows or more, more than
   2^31-1 CTAs, or splits whose merge needs 2^31 blocks or more (batch x num_qo_heads x
   head_dim / 128; only past 2^38 elements of o).
   Legal inside stream capture (after preload). Thread-safe. */
talon_status talon_decode_attention(talon_ctx *ctx, CUstream stream,
                                    const talon_decode_attention_args *args);

/* Merges two partial attention results over disjoint key sets (prefix caching, cascade):
     lse = ln(exp(lse_a) + exp(lse_b))
     o   = exp(lse_a - lse) * o_a + exp(lse_b - lse) * o_b
   rows = tokens * heads; o, o_a, o_b [rows, head_dim] dtype; lse, lse_a, lse_b fp32 [rows]
   (natural log, as talon_decode_attention writes). A side with lse = -inf contributes
   nothing; both -inf gives o = 0, lse = -inf. lse (output) is optional (0). head_dim a multiple
   of 8 in [8, 4096]; o pointers 16-byte aligned, lse pointers 4-byte aligned; outputs must not
   overlap inputs. One kernel, fp32 math. Thread-safe, capturable. */
typedef struct talon_merge_attention_states_args {
    CUdeviceptr o, lse;         /* out */
    CUdeviceptr o_a, lse_a, o_b, lse_b;
    int64_t rows, head_dim;
    talon_dtype dtype;
} talon_merge_attention_states_args;
talon_status talon_merge_attention_states(talon_ctx *ctx, CUstream stream,
                                          const talon_merge_attention_states_args *args);

/* ---------------------------------------------------------------- attention (prefill) */
/* talon_prefill_attention: many query tokens per request (prompts, chunked prefill), over a
   ragged batch, with k and v contiguous per request.
     o[t, h, :] = sum_j softmax_j(score(t, h, j)) * v[k0 + j, h / (Hq / Hk), :]
     score(t, h, j) = soft_cap(sm_scale * q[t, h, :] . k[k0 + j, h / (Hq / Hk), :])
   Request b owns query tokens [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of q and o and keys
   [k0, k1) = [cu_seqlens_k[b], cu_seqlens_k[b + 1]) of k and v; L = k1 - k0 keys, n = its
   number of queries. Query i of the request (0-based) sits at key position pos = i + L - n
   (the new tokens are the last ones: causal masking aligned bottom-right, so a prefill over
   a cached prefix, n < L, works) and attends keys j of [0, L) with
     j <= pos                      when causal,
     j >= pos - window + 1         when window > 0 (the last `window` positions, itself
                                   included; without causal only this bound applies).
   soft_cap(x) = cap * tanh(x / cap) when logits_soft_cap = cap > 0, before the mask.
   lse[t, h] = ln(sum_j exp(score(t, h, j))) over the attended keys (NATURAL log, fp32, as
   talon_decode_attention and talon_merge_attention_states use it); a query with no key
   (L = 0, or pos < 0 when causal) gets o = 0 and lse = -inf.
   Shapes: q [total_q, num_qo_heads, head_dim], o [total_q, num_qo_heads, v_head_dim] (dtype);
   k [total_kv, num_kv_heads, head_dim], v [total_kv, num_kv_heads, v_head_dim] (dtype);
   token strides q_stride, k_stride, v_stride, o_stride in elements (0: heads x the tensor's
   head_dim; a multiple of 8, the heads of a token contiguous); lse fp32 [total_q,
   num_qo_heads] contiguous; cu_seqlens_q, cu_seqlens_k int32 [batch + 1] on the device.
   num_qo_heads a multiple of num_kv_heads (MHA, GQA, MQA); head_dim 64, 128 or 256 with
   v_head_dim the same (0 says so), or head_dim 192 with v_head_dim 128 (DeepSeek-style
   attention without weight absorption; sm_scale's default stays 1 / sqrt(head_dim)).
   Caller guarantees (device data is never read on the host, so a captured graph stays valid
   for any lengths within the bounds): cu_seqlens non-decreasing from 0, every query count
   <= max_seqlen_q, cu_seqlens_q[batch] <= total_q and cu_seqlens_k[batch] <= total_kv.
   Violations give wrong results but no access outside q, k, v, o and lse: loads past
   total_q / total_kv read zeros, query rows past max_seqlen_q are not written.
   Precision: fp32 scores, online softmax in fp32 (exp2 with log2 e folded into the scale),
   the weights rounded to dtype (8 significant bits for bf16, 11 for f16) for P v on the
   tensor cores, fp32 accumulation, o rounded once.
   FP8 (dtype TALON_DTYPE_FP8_E4M3, head_dim 128 or 256, v_head_dim the same): q, k and v hold
   e4m3 with per-tensor scales (real value = e4m3 value x q_scale, k_scale, v_scale, as
   talon_quant_fp8 with TALON_QUANT_TENSOR writes them), o is bf16, token strides multiples of 16
   elements (o_stride of 8). q k^T runs on the fp8 tensor cores with q_scale x k_scale folded
   into sm_scale; the softmax weights are rounded to e4m3 for P v (4 significant bits:
   relative error up to 2^-4, absolute up to 2^-10 of the row's running max), v_scale is
   applied to o with 1 / l (FlashAttention-3's fp8 scheme). So |o - exact| <= sum_j (2^-4 p_j
   + 2^-10) |v_j| / sum_j p_j with p_j the exact weights, plus the fp8 tensor cores' own
   accumulation error (fewer bits than fp32) and o's bf16 rounding.
   Kernel: a fill of the workspace's counters (cuMemsetD32Async: a memset node when captured),
   then one launch of min(tiles, SMs) persistent CTAs over the tiles of 128 query rows of one
   head of one request (192 with 16-bit q, k, v at head_dim 64, and with fp8 at head_dim 128
   without a causal mask or window or from max_seqlen_q 8192 on), in the order (request, kv
   head, query block from the last, query head): CTA i starts at tile i and takes the next
   untaken tile from a counter in the workspace whenever it finishes one, so causal and
   ragged batches stay balanced, the longest tiles of each (request, kv head) pair go first
   and the tiles in flight share the k/v of a few pairs in L2. Which CTA runs a tile never
   changes the result (each tile's output is computed alone).
   Split keys: where the tiles fill fewer than 3 rounds of the SMs and every request has
   max_seqlen_q queries, the tiles of the last, partial round may each run as 2-8 pieces over
   a share of its key blocks, on as many SMs (a host rule on the shapes and the SM count:
   a short chunk over a long cached prefix with few heads, say). The last piece of a tile to
   finish merges the pieces' partial o, max and sum from the workspace in piece order: a split
   tile's o differs from an unsplit one's by fp32 summation order only, and does not depend
   on which piece finished last.
   Workspace: talon_prefill_attention_workspace_size's bytes, 16-byte aligned, contents on
   entry irrelevant; one call at a time per workspace (see WORKSPACES). */
typedef struct talon_prefill_attention_args {
    CUdeviceptr o;              /* out: [total_q, num_qo_heads, v_head_dim], dtype */
    CUdeviceptr lse;            /* out, optional (0: none): fp32 [total_q, num_qo_heads] */
    CUdeviceptr q;              /* [total_q, num_qo_heads, head_dim], dtype */
    CUdeviceptr k, v;           /* [total_kv, num_kv_heads, head_dim / v_head_dim], dtype */
    CUdeviceptr cu_seqlens_q;   /* int32 [batch + 1] */
    CUdeviceptr cu_seqlens_k;   /* int32 [batch + 1] */
    CUdeviceptr workspace;      /* counters and split tiles' partials: 16-byte aligned */
    int64_t workspace_bytes;    /* bytes available at workspace */
    int64_t batch;              /* [1, 2^20] */
    int64_t total_q, total_kv;  /* rows of q / o and of k / v: [1, 2^31 - 1] */
    int64_t max_seqlen_q;       /* [1, total_q]: bound on every request's query count;
                                   max_seqlen_q + total_kv <= 2^31 - 256 (int32 positions) */
    int64_t num_qo_heads, num_kv_heads; /* [1, 1024]; num_qo_heads % num_kv_heads == 0 */
    int64_t head_dim;           /* q's and k's: 64, 128, 256, or 192 (with v_head_dim 128) */
    int64_t v_head_dim;         /* v's and o's: 0 or head_dim, or 128 with head_dim 192 */
    int64_t q_stride, k_stride, v_stride, o_stride; /* elements between tokens; 0: dense */
    int64_t window;             /* sliding window in key positions; 0: none */
    int causal;                 /* 0 or 1 */
    float sm_scale;             /* 0: 1 / sqrt(head_dim); else > 0 and finite */
    float logits_soft_cap;      /* 0: off; else > 0 and finite */
    talon_dtype dtype;          /* q, k, v and o: bf16 or f16; or TALON_DTYPE_FP8_E4M3: q, k,
                                   v e4m3 and o bf16 (FP8 above) */
    float q_scale, k_scale, v_scale; /* fp8 only: real value = e4m3 value x scale; finite
                                        and > 0 (ignored otherwise) */
} talon_prefill_attention_args;

/* Workspace bytes talon_prefill_attention needs for these args on ctx's device: 16 (a tile
   counter) where no tile is split (split keys, above), else the counter, a counter per 16
   query rows of each split tile and each piece's partial: split tiles x pieces x rows a tile x
   (v_head_dim / 2 + 4) x 8 bytes (at most 3 x SMs pieces: up to 54 MB at v_head_dim 256 on
   132 SMs). It depends on the SM count, batch, total_q, total_kv, max_seqlen_q, the heads,
   head_dim, window, causal and dtype; args that the op refuses get 16. Reads no device
   memory, launches nothing. Errors: ctx, args or bytes NULL. Thread-safe. */
talon_status talon_prefill_attention_workspace_size(talon_ctx *ctx,
                                                    const talon_prefill_attention_args *args,
                                                    int64_t *bytes);

/* Errors (INVALID_ARGUMENT, nothing launched): NULL pointers (lse may be 0), pointers not
   16-byte aligned (q, k, v, o, workspace) or 4-byte aligned (lse, cu_seqlens_*), shapes out
   of range, num_qo_heads not a multiple of num_kv_heads, v_head_dim not matching head_dim,
   strides below a token's heads or not a multiple of 8 (fp8 q, k, v: 16), fp8 with head_dim
   64 or 192, fp8 scales not finite and > 0 (or q_scale x k_scale x sm_scale out of fp32
   range), workspace_bytes under talon_prefill_attention_workspace_size's,
   max_seqlen_q + total_kv over 2^31 - 256, o overlapping q, k, v, lse or the workspace.
   Legal inside stream capture (after preload). Thread-safe. */
talon_status talon_prefill_attention(talon_ctx *ctx, CUstream stream,
                                     const talon_prefill_attention_args *args);

/* talon_prefill_attention_paged: the same attention with k and v read from the paged KV cache
   as talon_decode_attention takes it (chunked prefill, prefix caching: the new tokens were
   appended with talon_kv_append and the prompt's earlier tokens are already there).
   Request b has L = kv_lens[b] keys, its tokens t = 0..L-1 in page
   page_table[b * page_table_stride + t / page_size] at offset t % page_size; its queries are
   [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of q and o and sit at the last positions of the L
   (pos = i + L - n, as above: causal, window, soft-cap, lse and the no-key rule are those of
   talon_prefill_attention).
   Shapes: q, o, lse, cu_seqlens_q, strides as talon_prefill_attention; k_cache, v_cache
   [num_pages, page_size, num_kv_heads, head_dim] (TALON_KV_NHD) or [num_pages, num_kv_heads,
   page_size, head_dim] (TALON_KV_HND), contiguous, kv_dtype; page_table int32 [batch,
   page_table_stride]; kv_lens int32 [batch]. page_size a power of two in [1, 256]; each
   cache fewer than 2^32 rows of head_dim elements (num_pages x page_size x num_kv_heads).
   Caller guarantees: talon_prefill_attention's for cu_seqlens_q and max_seqlen_q, plus
   0 <= kv_lens[b] <= max_kv_len and valid page ids in the first ceil(kv_lens[b] / page_size)
   entries of each page-table row (later entries are never read). Violations give wrong
   results but no access outside the buffers: kv_lens is clamped to [0, max_kv_len], and a
   page id outside [0, num_pages) reads zeros (a checked ctx records either: CHECKED MODE).
   Kernel: talon_prefill_attention's with another loader. Pages of 16 keys and more: one TMA
   copy per page and 64 columns of a block of keys (a block is 128 keys, 64 at head_dim 256);
   smaller pages (where that would be up to 128 copies a block): the rows are gathered by the
   producer warps' 16-byte copies. Either way a request's keys past kv_lens[b] are never used
   (the cache's unwritten slots may hold anything, NaN included). Workspace and scheduling as
   talon_prefill_attention's; tiles of 128 query rows.
   fp8 caches (kv_dtype TALON_DTYPE_FP8_E4M3, as talon_kv_append and talon_decode_attention
   use them: real value = e4m3 value x k_scale / v_scale): the producer warps load each block's
   rows and widen them (exact) in shared memory, v to f16 and k to f16 (to dtype at head_dim
   256), so P v runs in f16 (P rounded to f16, 3 bits more than bf16) and q k^T keeps q's
   precision: a bf16 q meets an f16 k as f16 scaled by a power of two per 16 query rows (the
   largest finite |q| of those rows in [2^14, 2^15)), exact except for elements over 2^28
   times smaller than that largest; inf and NaN stay themselves. k_scale is folded into
   sm_scale and v_scale into o. Any page size, both layouts, head_dim 64, 128, 256. */
typedef struct talon_prefill_attention_paged_args {
    CUdeviceptr o;              /* out: [total_q, num_qo_heads, head_dim], dtype */
    CUdeviceptr lse;            /* out, optional (0: none): fp32 [total_q, num_qo_heads] */
    CUdeviceptr q;              /* [total_q, num_qo_heads, head_dim], dtype */
    CUdeviceptr k_cache, v_cache; /* [num_pages, page_size, Hk, head_dim] (layout), kv_dtype */
    CUdeviceptr page_table;     /* int32 [batch, page_table_stride] */
    CUdeviceptr kv_lens;        /* int32 [batch]: keys of each request, its new tokens included */
    CUdeviceptr cu_seqlens_q;   /* int32 [batch + 1] */
    CUdeviceptr workspace;      /* counters and split tiles' partials: 16-byte aligned */
    int64_t workspace_bytes;    /* bytes available at workspace */
    int64_t batch;              /* [1, 2^20] */
    int64_t total_q;            /* rows of q / o: [1, 2^31 - 1] */
    int64_t max_seqlen_q;       /* [1, total_q]: bound on every request's query count;
                                   max_seqlen_q + max_kv_len <= 2^31 - 256 (int32 positions) */
    int64_t max_kv_len;         /* [1, 2^30]: bound on every kv_lens[b] */
    int64_t num_pages;          /* pages in each cache: [1, 2^31 - 1] */
    int64_t page_size;          /* power of two in [1, 256] */
    int64_t page_table_stride;  /* int32 elements between rows; 0: ceil(max_kv_len / page_size) */
    int64_t num_qo_heads, num_kv_heads; /* [1, 1024]; num_qo_heads % num_kv_heads == 0 */
    int64_t head_dim;           /* 64, 128, 256 */
    int64_t q_stride, o_stride; /* elements between tokens; 0: dense */
    int64_t window;             /* sliding window in key positions; 0: none */
    int causal;                 /* 0 or 1 */
    float sm_scale;             /* 0: 1 / sqrt(head_dim); else > 0 and finite */
    float logits_soft_cap;      /* 0: off; else > 0 and finite */
    talon_dtype dtype;          /* q, o (and the caches unless kv_dtype says fp8): bf16 or f16 */
    talon_kv_layout layout;     /* the caches' layout; 0: NHD */
    talon_dtype kv_dtype;       /* the caches: 0 or dtype (dtype), or TALON_DTYPE_FP8_E4M3 */
    float k_scale, v_scale;     /* fp8 caches only: finite and > 0 (ignored otherwise) */
} talon_prefill_attention_paged_args;

/* Workspace bytes talon_prefill_attention_paged needs, as talon_prefill_attention's, with
   max_kv_len for a request's keys (and the page size and cache shapes, which pick the
   kernel). */
talon_status talon_prefill_attention_paged_workspace_size(
    talon_ctx *ctx, const talon_prefill_attention_paged_args *args, int64_t *bytes);

/* Errors (INVALID_ARGUMENT, nothing launched): talon_prefill_attention's for q, o, lse,
   cu_seqlens_q, the workspace and the shapes (head_dim 192 excluded), plus NULL or misaligned
   caches (16 bytes), page_table or kv_lens (4 bytes), page_size not a power of two in
   [1, 256], max_kv_len or num_pages out of range (caches of 2^32 rows or more included),
   max_seqlen_q + max_kv_len over 2^31 - 256, page_table_stride < ceil(max_kv_len /
   page_size), an unknown layout, o overlapping a cache, kv_dtype other than 0, dtype or
   TALON_DTYPE_FP8_E4M3, fp8 scales not finite and > 0 (or k_scale x sm_scale out of fp32
   range).
   Legal inside stream capture (after preload). Thread-safe. */
talon_status talon_prefill_attention_paged(talon_ctx *ctx, CUstream stream,
                                           const talon_prefill_attention_paged_args *args);

/* ---------------------------------------------------------------- dense GEMM */
/* D = epilogue(alpha * A . B^T): the linear layer y = x W^T (+ bias, activation, residual),
   or its gated form (the MLP's up-projection, SwiGLU / GeGLU) without an intermediate; bf16,
   f16 or fp8 e4m3 inputs.
     a: [m, k] row-major (activations), row stride lda.
     b: [n, k] row-major (weights, nn.Linear's layout), row stride ldb; gated: [2n, k], the
        gate's n rows then the up half's n rows (a fused gate_up weight).
     d: [m, n] row-major, row stride ldd.
   Epilogue, in this order, in fp32, one rounding at the end:
     x = alpha * (A . B^T)[i, j] + bias[j]            (bias optional: 0 = none)
         fp8: x = alpha * a_scale[i] * b_scale[j] * (A . B^T)[i, j] + bias[j] (block scales:
              per 128 of k, below)
     y = act(x)                                        (act: talon_gemm_act)
     gated: y = act(x_gate[i, j]) * x_up[i, j], each x with its bias (bias [2n]: gate, up)
     d[i, j] = y + beta * c[i, j]                      (c optional: 0 = none)
   Types: a, b and bias of dtype (bf16 or f16); d and c of out_dtype (dtype or f32).
   FP8 (dtype TALON_DTYPE_FP8_E4M3): a and b hold e4m3 (real value = e4m3 value x its scale),
   d, c and bias are bf16 (out_dtype must be bf16), and scale says how the fp32 scales are
   laid out (talon_gemm_scale): TENSOR, one scale each (a_scale and b_scale point to one
   fp32 each, read on the device: no host synchronisation); ROW, a_scale [m] (per token) and
   b_scale [n] (per output channel; gated: [2n], the gate's then the up half's); BLOCK (the
   DeepSeek-V3 layout), a_scale [ceil(k / 128), m4] (m4 = m rounded up to a multiple of 4;
   a_scale[g * m4 + i] scales a[i, 128 g .. 128 g + 127], as talon_quant_fp8's group scales
   lay them out by default) and b_scale [ceil(rows of b / 128), ceil(k / 128)] row-major (one
   per 128 x 128 block of b; gated: n a multiple of 64). Per-tensor and per-row scales apply
   once, in the epilogue, and the e4m3 products of all of k are summed by the tensor cores'
   fp8 instructions, whose accumulation keeps fewer bits than fp32 (as cuBLASLt's
   fast-accumulation mode; docs/notes/gemm.md has the measured error); block scales apply
   per 128 of k, each k-block's product added in fp32 (x = alpha sum_g a_s b_s (A . B^T)_g).
   16-bit inputs take scale NONE and no scale pointers.
   Accumulation in fp32 on the tensor cores. Results are deterministic: the same inputs on the
   same device give the same bits, every call (no atomics; split-K partial sums, where the plan
   splits k, are added in a fixed order). The plan depends on the SM count, so a device with
   another count may split k differently: results then differ by fp32 summation order only.
   Limits: m in [1, 2^24]; n in [8, 2^20] and k in [8, 2^20], both multiples of 8 (fp8: k a
   multiple of 16); strides (elements, 0 = contiguous: lda = ldb = k, ldc = ldd = n) at least
   a row and multiples of 16 bytes (8 elements; fp8 lda and ldb: 16); a, b, d, c and bias
   16-byte aligned; a_scale 4-byte aligned, b_scale 8-byte (ROW) or 4-byte aligned. c may be
   d itself (same pointer and stride: the residual is read before d is written, element by
   element); otherwise d must not overlap any input. Rows of a beyond m and of b beyond n are
   never read.
   Kernel: one persistent launch (CTAs of a TMA producer warpgroup and two wgmma warpgroups),
   planned on the host from (m, n, k, input size, gated, whether there is a bias, activation
   or residual, out_dtype, scale, SM count) alone: tiles of 128 rows x 256, 192 or 128
   columns, whichever fills the SMs' waves best (gated: 128 or 64 columns from 256 or 128 rows
   of b; block scales: 256 or 128, gated 256 where n is a multiple of 128); 128 x 256 tiles in
   clusters of 2 CTAs that share b's tile; where the epilogue weighs (fp8 with tensor or row
   scales, or gating, at most 64 k-blocks of 128 bytes; a bias or activation likewise, past
   32 k-blocks only where the other tiles would be narrower than 256 or number 5+ per SM; a
   residual alone at most 32; m x b's rows <= 2^27, 2+ tiles per SM) 128 x 128 "ping-pong"
   tiles in pairs, each warpgroup on tiles of its own so that one's epilogue runs under the
   other's products; split-K in 2 ways, reduced inside a cluster of 2, where tiles are fewer than
   SMs; for m <= 64 with a 16-bit output and no gating, the product is computed transposed
   (b's rows on the wide side of the tensor-core tile), the weight-bandwidth-bound decode
   regime (also m 65..128 of 16-bit inputs with a long k and a narrow n, where it fills more
   SMs). No workspace.
   docs/notes/gemm.md has the plan's rules and measurements.
   Errors (INVALID_ARGUMENT, nothing launched): NULL or misaligned pointers, sizes or strides
   out of range or not multiples of 8 (16), unsupported dtype / out_dtype / act (NONE ..
   GELU_TANH) / scale (a scale mode or scale pointer with 16-bit inputs, or none with fp8),
   gated not 0/1, a non-finite alpha or beta; DRIVER if the driver rejects a tensor map.
   Thread-safe; legal inside stream capture (after preload; the tensor maps are built on the
   host and passed by value, so a captured graph keeps them). */
typedef enum talon_gemm_act {
    TALON_GEMM_ACT_NONE = 0,
    TALON_GEMM_ACT_RELU = 1,
    TALON_GEMM_ACT_SILU = 2,      /* x / (1 + exp(-x)); gated: SwiGLU */
    TALON_GEMM_ACT_GELU_ERF = 3,  /* 0.5 x (1 + erf(x / sqrt 2)); gated: GeGLU */
    TALON_GEMM_ACT_GELU_TANH = 4, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    /* gated only, talon_moe_gemm and talon_grouped_gemm only (gpt-oss's SwiGLU with a limit):
       y = g / (1 + exp(-alpha g)) * (u + 1), g = min(x_gate, limit),
       u = min(max(x_up, -limit), limit); alpha and limit from the args (act_alpha,
       act_limit); a NaN gate or up gives NaN */
    TALON_GEMM_ACT_CLAMPED_SWIGLU = 5
} talon_gemm_act;

/* How fp8 operands are scaled (fp32 scales; real value = stored value x scale). */
typedef enum talon_gemm_scale {
    TALON_GEMM_SCALE_NONE = 0,   /* bf16 / f16 inputs */
    TALON_GEMM_SCALE_TENSOR = 1, /* a_scale, b_scale: one fp32 each */
    TALON_GEMM_SCALE_ROW = 2,    /* a_scale [m], b_scale [n] (gated [2n]): per row of a, of b */
    TALON_GEMM_SCALE_BLOCK = 3   /* DeepSeek-V3's: a per row and 128 k, b per 128 x 128 block */
} talon_gemm_scale;

typedef struct talon_gemm_args {
    CUdeviceptr d, a, b;
    CUdeviceptr bias;           /* optional: [n] (gated: [2n]) of dtype (fp8: bf16) */
    CUdeviceptr c;              /* optional: the residual [m, n] of out_dtype; may be d */
    CUdeviceptr a_scale, b_scale; /* fp8 only: fp32 scales as `scale` says */
    int64_t m, n, k;            /* n: columns of d (gated: b has 2n rows) */
    int64_t lda, ldb, ldc, ldd; /* elements; 0: k, k, n, n */
    float alpha;                /* 0: 1 */
    float beta;                 /* with c; 0: 1 */
    talon_gemm_act act;
    int gated;                  /* 0 or 1 */
    talon_dtype dtype;          /* a, b: bf16, f16 or TALON_DTYPE_FP8_E4M3 */
    talon_dtype out_dtype;      /* d, c: dtype or f32 (bf16 = 0 is rejected for f16 inputs);
                                   fp8 inputs: bf16 */
    talon_gemm_scale scale;     /* fp8: TENSOR, ROW or BLOCK; 16-bit: NONE */
} talon_gemm_args;
talon_status talon_gemm(talon_ctx *ctx, CUstream stream, const talon_gemm_args *args);

/* ---------------------------------------------------------------- fp8 quantisation */
/* in [rows, cols] (bf16 or f16) -> out [rows, cols] fp8 e4m3 and fp32 scales, real value =
   out x scale: the inputs of talon_gemm's fp8 modes. By mode:
     TALON_QUANT_TENSOR  static: scale points to one fp32 (read on the device);
                         out = e4m3(x / scale[0]).
     TALON_QUANT_TOKEN   dynamic per row: s_r = max(amax_r / 448, 2^-126) is written to
                         scale[r] (rows values); out = e4m3(x / s_r).
     TALON_QUANT_GROUP   dynamic per row and group of 128 columns (DeepSeek-V3's activation
                         scales): s as above over the group, written to
                         scale[r * scale_row_stride + g * scale_group_stride].
   amax is the largest |x| (NaN never wins); the quotient x / s is the IEEE fp32 division,
   then e4m3 rounds it to nearest even and saturates to +-448 (cvt.rn.satfinite; NaN stays
   NaN). All-zero rows or groups get scale 2^-126 and zeros; one with an inf gets an inf scale
   (its finite values quantise to 0, the inf to NaN). Bit-exact and deterministic.
   Group scale layout: strides in elements; both 0 means group-major with 16-byte rows
   (scale_row_stride 1, scale_group_stride = rows rounded up to a multiple of 4), as
   block-scaled fp8 GEMMs read them; row-major [rows, cols / 128] is scale_row_stride =
   cols / 128, scale_group_stride 1. Otherwise one stride must be 1 and the other at least
   the first dimension's extent, and the scales written span at most 2^60 elements.
   Limits: rows in [1, 2^31); cols in [16, 2^24], a multiple of 16 (GROUP: of 128); strides
   (elements, 0 = cols) at least cols, in_stride a multiple of 8 and out_stride of 16; in and
   out 16-byte aligned, scale 4-byte aligned; out and the scales written must not overlap the
   inputs or each other.
   Kernel: TENSOR and TOKEN, one warp per row of up to 1024 elements (8 rows a block), else
   one block per row, of 128 or 256 threads (the fewest whole warps that keep a row of up to
   8192 elements on chip); GROUP, 8 threads per group, the groups of all rows numbered together
   (32 a block; past 2^31 groups, 512 GiB of input, one launch per chunk of rows).
   The launch is a programmatic dependent of the stream's previous kernel (cuLaunchKernelEx;
   captured graphs keep the edge): its blocks wait for that kernel's grid (griddepcontrol.wait)
   before they read anything, and allow dependents to launch as they start
   (griddepcontrol.launch_dependents), so the next kernel's prologue overlaps this one (e.g.
   talon_moe_gemm's down projection warms L2 with its first weights meanwhile); a kernel of
   yours launched right after with programmatic stream serialization must wait
   (griddepcontrol.wait) before it reads out or the scales.
   Errors (INVALID_ARGUMENT, nothing launched): NULL or misaligned pointers, sizes or strides
   out of range or not multiples, unsupported dtype or mode, a scale layout that is not one,
   overlaps. Thread-safe; legal inside stream capture (after preload). */
typedef enum talon_quant_mode {
    TALON_QUANT_TENSOR = 0, /* scale: in, one fp32 */
    TALON_QUANT_TOKEN = 1,  /* scale: out, [rows] */
    TALON_QUANT_GROUP = 2   /* scale: out, one per row and 128 columns (layout above) */
} talon_quant_mode;

typedef struct talon_quant_fp8_args {
    CUdeviceptr out;                /* [rows, cols] e4m3 */
    CUdeviceptr in;                 /* [rows, cols] of dtype */
    CUdeviceptr scale;              /* fp32, by mode */
    int64_t rows, cols;
    int64_t out_stride, in_stride;  /* elements; 0: cols */
    int64_t scale_row_stride, scale_group_stride; /* GROUP; both 0: group-major */
    talon_quant_mode mode;
    talon_dtype dtype;              /* in: bf16 or f16 */
} talon_quant_fp8_args;
talon_status talon_quant_fp8(talon_ctx *ctx, CUstream stream, const talon_quant_fp8_args *args);

/* rmsnorm straight to fp8 e4m3, the norm before a quantised linear layer, with no 16-bit
   intermediate written; optionally fused with the residual add:
     residual (optional): residual[r, :] = round(residual[r, :] + in[r, :]) first (written
                          back; in is not written), and that sum is normalised
     y = rmsnorm(x) * weight, rounded to dtype (what talon_rmsnorm stores)
     TALON_QUANT_TENSOR:  out = e4m3(y / scale[0])       (scale: one fp32, read)
     TALON_QUANT_TOKEN:   s_r = max(amax_r(y) / 448, 2^-126) -> scale[r]; out = e4m3(y / s_r)
   out and scale are then bit for bit those of talon_rmsnorm (talon_fused_add_rmsnorm with
   residual) on the same views followed by talon_quant_fp8. Shapes and limits as
   talon_rmsnorm; out [rows, cols] e4m3 with out_stride (elements = bytes); a 16-byte path
   when pointers are 16-byte aligned and cols and strides are multiples of 8. Errors as
   talon_rmsnorm, plus mode (TENSOR or TOKEN), a NULL or misaligned (4 bytes) scale, and out
   or the written scales overlapping another argument. Thread-safe; capturable. */
typedef struct talon_rmsnorm_quant_fp8_args {
    CUdeviceptr out;                /* [rows, cols] e4m3 */
    CUdeviceptr scale;              /* TENSOR: in, one fp32; TOKEN: out, [rows] */
    CUdeviceptr in;                 /* [rows, cols] of dtype */
    CUdeviceptr residual;           /* optional: [rows, cols] of dtype, updated */
    CUdeviceptr weight;             /* [cols] of dtype */
    int64_t rows, cols;
    int64_t out_stride, in_stride, residual_stride; /* elements; 0: cols */
    float eps;
    talon_quant_mode mode;          /* TENSOR or TOKEN */
    talon_dtype dtype;              /* bf16 or f16 */
} talon_rmsnorm_quant_fp8_args;
talon_status talon_rmsnorm_quant_fp8(talon_ctx *ctx, CUstream stream,
                                     const talon_rmsnorm_quant_fp8_args *args);

/* ---------------------------------------------------------------- MoE expert GEMMs */
/* The expert matmuls of a mixture-of-experts layer, over talon_moe_align_block_size's layout
   (its three outputs, block_size 128), one launch per GEMM. For every block of 128 sorted
   slots below num_tokens_post_padded whose expert e = expert_ids[block] is in [0, experts),
   and every slot s of it, with f = sorted_token_ids[s] (the pair t * topk + j, or the
   sentinel tokens * topk for a padding slot):
     x = the row of a that a_rows names (below); padding slots: zeros (a SORTED: a[s] as is)
     z_j = x . b[e, j, :] + bias[e, j]   in fp32, for each row j of b (bias optional; a
                                         padding slot takes none)
     y = act(z_j) for each output column j < n (act: talon_gemm_act)
     gated: y = act(z_j) * z_(n+j)   (b holds gate then up rows; CLAMPED_SWIGLU: its rule)
     y *= topk_weights[f] when topk_weights is given (padding slots: 0)
     the row of d that d_rows names = y, rounded to dtype once
   Row layouts (talon_moe_rows):
     TALON_MOE_ROWS_SORTED  row s: [sorted_capacity, cols], in sorted order; the layout that
                            lets the next GEMM read its a by TMA, and the usual one between
                            the two GEMMs (every slot of a block with work is written,
                            padding slots too)
     TALON_MOE_ROWS_TOKEN   row t = f / topk: [tokens, cols]; a only (the hidden states)
     TALON_MOE_ROWS_PAIR    row f: [tokens * topk, cols] (vLLM's intermediate layout); as d,
                            padding slots write nothing, and talon_moe_sum then combines
                            the [tokens, topk, n] rows. Pairs whose id moe_align skipped
                            (outside [0, experts): -1) or whose block is skipped are not
                            written either: zero d first (cuMemsetD8Async) when some ids
                            may be masked and talon_moe_sum sums every slot
   The MoE MLP with this op:
     talon_moe_router_topk -> topk_ids, topk_weights
     talon_moe_align_block_size(block_size 128) -> sorted_token_ids, expert_ids, num_post
     talon_moe_gemm(a = hidden TOKEN, b = w13 [experts, 2I, H], gated, act SILU,
                    d = h SORTED [sorted_capacity, I])
     talon_moe_gemm(a = h SORTED, b = w2 [experts, H, I], topk_weights,
                    d = y PAIR [tokens * topk, H])
     talon_moe_sum(y -> out [tokens, H], weights 0: they were applied)
   At decode (up to 64 tokens) keep h in PAIR rows ([tokens * topk, I]; a_rows PAIR on the
   down call): a SORTED h there is mostly padding slots, which the gate/up call writes (zeros)
   and an fp8 pipeline's talon_quant_fp8 of h reads; PAIR rows hold only the pairs.
   gpt-oss's experts: the same with act CLAMPED_SWIGLU (act_alpha 1.702, act_limit 7), bias
   w13's [experts, 2I] on the gate/up call and w2's [experts, H] on the down call (added before
   the router weight multiplies the row), and w13's gate and up rows de-interleaved once at
   load time (gpt-oss stores them alternating: gate rows are its even rows, up rows its odd
   ones).
   Blocks past num_tokens_post_padded, and blocks of an expert outside [0, experts) (expert
   parallelism: experts on another GPU; moe_align's -1 blocks), are skipped: their d rows are
   not written. Everything is read on the device: no host synchronisation, capturable. A sorted
   id above the sentinel is treated as padding; a checked ctx records it, and a
   num_tokens_post_padded past the capacities (CHECKED MODE).
   Types: a, b and d of dtype (bf16 or f16); or a and b fp8 e4m3 and d bf16 with fp32 scales
   over a's rows in a_rows' layout (tokens, pairs or sorted slots; rows4 = their count rounded
   up to a multiple of 4):
   - scale TALON_GEMM_SCALE_TENSOR: a_scale one float, b_scale [experts];
   - TALON_GEMM_SCALE_ROW (per token or pair x per channel): a_scale one per row of a,
     b_scale [experts, gated ? 2n : n] (one per row of each expert's b; 8-byte aligned);
     TENSOR and ROW multiply each row's fp32 sum before the activation, as
     talon_grouped_gemm's;
   - TALON_GEMM_SCALE_BLOCK (DeepSeek-V3): a_scale [ceil(k / 128), rows4] (a_scale[j * rows4 +
     r] scales a[r, 128 j .. 128 j + 127]: talon_quant_fp8's group scales of a, e.g. of the
     [tokens, k] hidden states, TOKEN rows), b_scale [experts, ceil(rows of b / 128),
     ceil(k / 128)] (gated: n a multiple of 64); each k-block's product scaled before it is
     added, as talon_grouped_gemm's.
   topk_weights fp32 [tokens, topk]; the three moe_align arrays int32; bias of d's type (bf16
   with fp8), [experts, gated ? 2n : n] (gated: each expert's n gate biases, then its n up
   biases), added after the fp8 scales. Accumulation in fp32 on the tensor cores;
   deterministic (no atomics).
   Limits: tokens in [1, 65536], topk in [1, 64], experts in [1, 512] (moe_align's);
   block_size 128; sorted_capacity and expert_ids_capacity at least
   talon_moe_align_block_size_capacity's for (tokens, topk, experts, 128), and what was
   passed to moe_align; n and k in [8, 2^20], multiples of 8 (floor(sorted_capacity / 128) x
   ceil(n / 64) <= 2^30 always fits: the kernel's tile count); strides in elements (0 =
   contiguous: lda = k, ldb = k, ldd = n), at least a row, multiples of 8 (fp8: lda and ldb
   of 16, so k too when they are 0) and at most 2^36; b is [experts, gated ? 2n : n, k] with
   row stride ldb and the experts back to back; a, b and d 16-byte aligned, the others
   (bias too) 4-byte aligned (a ROW b_scale 8-byte); the scales 0 with bf16/f16. d must not
   overlap any input.
   act_alpha and act_limit: CLAMPED_SWIGLU's, alpha finite and > 0, limit > 0 (+inf: no
   clamping), 0 with every other act.
   Kernel: one persistent launch (CTAs of 384 threads in clusters of 2: a loader warpgroup,
   two wgmma warpgroups of 64 rows), tiles of one block x 256 or 128 rows of b (gated: 128 or
   64 output columns), chosen on the host from (tokens, topk, experts, n, gated, SM count;
   BLOCK, gated, n not a multiple of 128: 128); a gathered a (TOKEN, PAIR) is copied by the
   loader's 128 threads, a SORTED a and b by TMA. At <= 128 tokens a warpgroup whose 64 slots
   are all padding skips its products (unless a and d are both SORTED). At <= 64 tokens
   (BLOCK: 32; unless a and d are both SORTED) a transposed kernel instead: one CTA per SM,
   tiles of 128 output columns (256 rows of b when gated) x the block's slots in chunks of 16,
   32 or 64 (the smallest that holds twice an expert's average rows, tokens x topk / experts,
   or else the tokens); a chunk without a pair is not computed (SORTED d: zeros), nor are a
   chunk's slots past its last pair. An expert with more rows than a chunk (skewed routing, or a
   routing that names it more than once per token) is still exact; its weights are then read
   once per chunk with work. No workspace.
   The launch is a programmatic dependent of the stream's previous kernel (cuLaunchKernelEx;
   captured graphs keep the edge), so the down projection starts while the gate/up one drains:
   before it waits for that kernel's grid (griddepcontrol.wait) a CTA only warms L2 with its
   first weights (the transposed kernel; which ones it reads from expert_ids, where a stale id
   only warms other weights). Both kernels allow dependents to launch as they start
   (griddepcontrol.launch_dependents), so a kernel of yours launched right after with
   programmatic stream serialization must wait (griddepcontrol.wait) before it reads d.
   Errors (INVALID_ARGUMENT, nothing launched): NULL or misaligned pointers, sizes, strides or
   capacities out of range, block_size not 128, an unsupported dtype, scale, act or row layout
   (d_rows TOKEN), gated not 0/1, d overlapping an input, act CLAMPED_SWIGLU without gating,
   act_alpha or act_limit out of range or set with another act; DRIVER if the driver rejects a
   tensor map. Thread-safe; legal inside stream capture (after preload). */
typedef enum talon_moe_rows {
    TALON_MOE_ROWS_SORTED = 0, /* row s of the sorted layout */
    TALON_MOE_ROWS_TOKEN = 1,  /* row f / topk: the token's (a only) */
    TALON_MOE_ROWS_PAIR = 2    /* row f = t * topk + j: the (token, slot) pair's */
} talon_moe_rows;

typedef struct talon_moe_gemm_args {
    CUdeviceptr d;                   /* out: rows as d_rows says, n columns */
    CUdeviceptr a;                   /* rows as a_rows says, k columns */
    CUdeviceptr b;                   /* [experts, gated ? 2n : n, k] */
    CUdeviceptr sorted_token_ids, expert_ids, num_tokens_post_padded; /* moe_align's */
    CUdeviceptr topk_weights;        /* optional: fp32 [tokens, topk], multiplies each row */
    int64_t tokens, topk, experts;
    int64_t block_size;              /* moe_align's: 128 */
    int64_t sorted_capacity, expert_ids_capacity; /* elements, as passed to moe_align */
    int64_t n, k;                    /* n: columns of d (gated: b has 2n rows per expert) */
    int64_t lda, ldb, ldd;           /* elements; 0: k, k, n */
    talon_moe_rows a_rows, d_rows;
    talon_gemm_act act;
    int gated;                       /* 0 or 1 */
    talon_dtype dtype;               /* a, b: bf16 or f16 (d the same), or fp8 e4m3 (d bf16) */
    talon_gemm_scale scale;          /* bf16/f16: NONE; fp8: TENSOR, ROW or BLOCK */
    CUdeviceptr a_scale, b_scale;    /* fp8 only: fp32 scales (above) */
    CUdeviceptr bias;                /* optional: [experts, gated ? 2n : n] of d's type */
    float act_alpha, act_limit;      /* CLAMPED_SWIGLU only (e.g. gpt-oss: 1.702, 7); else 0 */
} talon_moe_gemm_args;
talon_status talon_moe_gemm(talon_ctx *ctx, CUstream stream, const talon_moe_gemm_args *args);

/* The grouped GEMM: for each group g in [0, groups), D_g = epilogue(A_g . B[g]^T), with the
   epilogue of talon_moe_gemm (act, or gated act(gate) * up; no router weights), on the same
   kernels. Two layouts (talon_grouped_layout) say where each group's rows are:
     TALON_GROUPED_CONTIGUOUS  the groups' rows back to back in a [rows, k] and d [rows, n],
                               each group's rows padded to a multiple of 128 (what
                               talon_moe_align_block_size with block_size 128 and the rows
                               gathered in its order give): tile_groups (int32 [rows / 128])
                               holds the group of each 128-row tile; a tile whose group is
                               outside [0, groups) (e.g. -1 for padding, or expert
                               parallelism's experts on another GPU) is skipped, its d rows not
                               written. rows_used (optional, int32 [1], on the device: e.g.
                               moe_align's num_tokens_post_padded): tiles starting at or past
                               rows_used are skipped (NULL: every tile is walked; a checked
                               ctx records a value outside [0, rows]).
                               Padding rows inside a tile with work are computed and written
                               like the others.
     TALON_GROUPED_MASKED      a [groups, rows, k], d [groups, rows, n] (each group's rows
                               block `rows` rows after the previous one's): group g uses the
                               first group_rows[g] of its rows (int32 [groups], on the device,
                               clamped into [0, rows]; a checked ctx records one outside:
                               CHECKED MODE). Only those d rows are written; a's rows past
                               them may be read (never past a's last row) and do not matter.
                               The layout of expert-parallel decode under graph capture:
                               the shapes are fixed, the counts change per step.
   Types: a, b and d of dtype (bf16 or f16); or a and b fp8 e4m3 with fp32 scales and d bf16,
   over the [rows of a and d, .] view above (MASKED: groups x rows rows, r = g x rows + i):
   - scale TALON_GEMM_SCALE_TENSOR: a_scale one float, b_scale [groups] (one per group's b);
   - TALON_GEMM_SCALE_ROW (per token x per channel): a_scale [rows] (one per row r of a),
     b_scale [groups, gated ? 2n : n] (one per row of each group's b; 8-byte aligned);
     TENSOR and ROW scale the fp32 sum of the whole row's products: d = act(sum x a_scale x
     b_scale), gated act(gate x its scales) x (up x its scales);
   - TALON_GEMM_SCALE_BLOCK (DeepSeek-V3): a_scale [ceil(k / 128), rows4] (rows4 = those
     rows rounded up to a multiple of 4; a_scale[j * rows4 + r] scales a[r, 128 j .. 128 j +
     127], as talon_gemm's BLOCK and talon_quant_fp8's group scales lay them out) and
     b_scale [groups, ceil(rows of b / 128), ceil(k / 128)] row-major (one scale per 128 x 128
     block of each group's b; gated: of its [2n, k] rows, so n must be a multiple of 64); each
     k-block's product is scaled in fp32 before it is added.
   b is [groups, gated ? 2n : n, k] with row stride ldb and the groups back to back (gated:
   each group's gate rows, then its up rows). bias (optional) as talon_moe_gemm's, per group
   ([groups, gated ? 2n : n] of d's type), added to every row's sums (after the fp8 scales,
   before act). Accumulation in fp32 on the tensor cores; deterministic.
   Limits: groups in [1, 65536]; CONTIGUOUS rows a multiple of 128 in [128, 2^31 - 128];
   MASKED rows in [1, 2^20] and groups x rows < 2^31; n and k in [8, 2^20], multiples of 8
   (tiles: row blocks x ceil(n / 64) <= 2^30); strides as talon_moe_gemm's (0 = contiguous;
   fp8: lda and ldb multiples of 16, so k too when they are 0). a, b and d 16-byte aligned;
   tile_groups, rows_used, group_rows and the scales 4-byte aligned; the pointer of the
   other layout must be 0 (CONTIGUOUS: group_rows; MASKED: tile_groups and rows_used), the
   scales 0 with bf16/f16; bias 4-byte aligned. act_alpha and act_limit as talon_moe_gemm's.
   d must not overlap any input.
   Kernel: talon_moe_gemm's (one persistent launch; tile width 256 or 128 rows of b from
   (rows, n, gated, SM count); fp8 block scales, gated, n not a multiple of 128: 128), a
   programmatic dependent of the stream's previous kernel as there. No workspace.
   Errors (INVALID_ARGUMENT, nothing launched): NULL, misaligned or stray pointers, sizes or
   strides out of range, an unsupported dtype, scale, act or layout, gated not 0/1, d
   overlapping an input, act CLAMPED_SWIGLU without gating, act_alpha or act_limit out of range
   or set with another act; DRIVER if the driver rejects a tensor map. Thread-safe; legal
   inside stream capture (after preload). */
typedef enum talon_grouped_layout {
    TALON_GROUPED_CONTIGUOUS = 0, /* [rows, .]: groups back to back, 128-row tiles */
    TALON_GROUPED_MASKED = 1      /* [groups, rows, .]: the first group_rows[g] of each */
} talon_grouped_layout;

typedef struct talon_grouped_gemm_args {
    CUdeviceptr d;           /* out: CONTIGUOUS [rows, n]; MASKED [groups, rows, n] */
    CUdeviceptr a;           /* CONTIGUOUS [rows, k]; MASKED [groups, rows, k] */
    CUdeviceptr b;           /* [groups, gated ? 2n : n, k] */
    CUdeviceptr tile_groups; /* CONTIGUOUS: int32 [rows / 128], the group of each tile */
    CUdeviceptr rows_used;   /* CONTIGUOUS, optional: int32 [1], rows walked (NULL: all) */
    CUdeviceptr group_rows;  /* MASKED: int32 [groups], rows in use of each group */
    CUdeviceptr a_scale, b_scale; /* fp8 only: fp32 scales per tensor, row or block (above) */
    int64_t groups;
    int64_t rows;            /* CONTIGUOUS: all rows (a multiple of 128); MASKED: per group */
    int64_t n, k;            /* n: columns of d (gated: b has 2n rows per group) */
    int64_t lda, ldb, ldd;   /* elements; 0: k, k, n */
    talon_grouped_layout layout;
    talon_gemm_act act;
    talon_gemm_scale scale;  /* bf16/f16: NONE; fp8: TENSOR, ROW or BLOCK */
    int gated;               /* 0 or 1 */
    talon_dtype dtype;       /* a, b (and d): bf16 or f16; fp8 e4m3 with d bf16 */
    CUdeviceptr bias;        /* optional: [groups, gated ? 2n : n] of d's type */
    float act_alpha, act_limit; /* CLAMPED_SWIGLU only; else 0 */
} talon_grouped_gemm_args;
talon_status talon_grouped_gemm(talon_ctx *ctx, CUstream stream,
                                const talon_grouped_gemm_args *args);

#ifdef __cplusplus
}
#endif
#endif /* TALON_H */

/* ================================================================ implementation
   The dispatcher's code lives in include/talon/impl/ (vendor include/ whole); it is compiled
   where TALON_IMPLEMENTATION is defined. */
#if defined(TALON_IMPLEMENTATION) && !defined(TALON__IMPLEMENTED)
#define TALON__IMPLEMENTED
#include "talon/impl/core.h"
#include "talon/impl/families.h"
#endif /* TALON_IMPLEMENTATION */
