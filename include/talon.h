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
   cuda.h from the CUDA toolkit must be on the include path (for the CU* types only).

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

   REQUIREMENTS
   An sm_90 GPU (H100/H200) and a driver supporting the CUDA version the cubins were built with
   (CUDA 13 needs R580 or newer). The CUDA toolkit is needed only to build talon from source.

   LICENSE: Apache-2.0. */
#ifndef TALON_H
#define TALON_H

#include <stddef.h>
#include <stdint.h>
#include <cuda.h>

#define TALON_VERSION_MAJOR 0
#define TALON_VERSION_MINOR 1
#define TALON_VERSION_PATCH 0
#define TALON_VERSION_STRING "0.1.0"

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
    const char *version;            /* "0.1.0" */
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

enum { TALON_CTX_PRELOAD = 1 }; /* load every module at create time */

typedef struct talon_ctx_options {
    CUcontext context;  /* NULL: the context current on the calling thread */
    unsigned flags;     /* TALON_CTX_PRELOAD */
} talon_ctx_options;

/* Creates a context bound to one CUcontext. options may be NULL (all defaults).
   Errors: INVALID_ARGUMENT (out NULL, unknown flags, no current context), NO_DRIVER,
   UNSUPPORTED_DEVICE (names the device and its sm), MODULE_LOAD (with TALON_CTX_PRELOAD),
   DRIVER, OUT_OF_MEMORY. Not legal during stream capture of the calling thread's streams
   when TALON_CTX_PRELOAD is given. Thread-safe. */
talon_status talon_ctx_create(talon_ctx **out, const talon_ctx_options *options);

/* Loads every embedded module now (idempotent). Call before capturing a graph. */
talon_status talon_ctx_preload(talon_ctx *ctx);

/* Unloads the modules and frees the context. NULL is a no-op. The caller guarantees no op is
   running on this ctx from another thread and no launched kernel still needs it. */
void talon_ctx_destroy(talon_ctx *ctx);

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

typedef enum talon_dtype {
    TALON_DTYPE_BF16 = 0,   /* zero-initialised args mean bf16 */
    TALON_DTYPE_F16 = 1,
    TALON_DTYPE_F32 = 2,    /* where an op says so (logits, scores); the norms reject it */
    TALON_DTYPE_I32 = 3,    /* index tensors; no op takes it as its data type */
    TALON_DTYPE_FP8_E4M3 = 4 /* where an op says so (KV caches) */
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
   gelu tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
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
   tests/ref_router.c re-derives every id on the CPU, as it does from the logits without one.
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
   above +inf, as in torch.topk, and -0.0 equals +0.0. Among equal values the lower index
   wins: the set returned is exactly determined (no randomness at the k-th value). Values are
   copied bit for bit from the input (NaN payloads and the sign of zero are kept).
   sorted = 1: each output row is in descending order, equal values by ascending index;
   sorted = 0: the same set of k entries in an unspecified order (it may differ between calls).
   workspace: device memory of at least talon_topk_workspace_size(rows, cols) bytes,
     16-byte aligned, used only during the call (on the stream); its contents on entry do not
     matter. One workspace must not be shared by calls that may run at the same time.
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

/* Bytes of workspace talon_topk needs for rows x cols (at most 33 KB per row, except on the
   chunk path: up to 288 KB per row, at most 8 MB of chunk histograms in all); 0 when rows or
   cols is out of range. Needs no context. */
int64_t talon_topk_workspace_size(int64_t rows, int64_t cols);
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
   Capacities are in elements and must cover the worst case for the shape, from
   talon_moe_align_block_size_capacity:
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
     (never read out of bounds); or
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
   (positions_dtype); tokens * ceil((Hq + Hk) / 2) * rot_dim / 2 / v < 2^31 threads, v = 8 (NeoX)
   or 4 (GPT-J) pairs per thread on the 16-byte path, 1 otherwise.
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
   one past the end skips the token, leaving its cache rows untouched.
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
   Limit: tokens * 2 * Hk * D / v < 2^31 - 512 (v = 8 on the 16-byte path, else 1). One
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
   bytes, that is 256 GiB, so any cache that fits in a GPU's memory).
   Split-KV: each (request, kv head) is split over `splits` CTAs, each taking an equal share
   of that request's attended keys; the partial (o, lse) go to the workspace and a merge kernel
   writes o and lse (one kernel, no workspace, when splits = 1). The split count depends only
   on host values: batch, num_kv_heads, heads per CTA and max_kv_len, with the GPU taken as
   132 SMs (H100 SXM / H200; other SM counts change the speed, never the result):
     ctas = batch * num_kv_heads * ceil(group / 4)        (group = num_qo_heads / num_kv_heads)
     slots = 528                                          (4 resident CTAs x 132 SMs)
     cost(s) = ceil(ctas * s / slots) / s                 (waves of CTAs doing 1/s of the work)
     splits = 1 when 198 < ctas <= 528                    (more than 1.5 CTAs per SM, one wave)
     else s0 = the smallest s in [1, min(256, ceil(max_kv_len / 1024))] with the least
       cost(s); when ctas * s0 <= 198 (at most 1.5 CTAs per SM) it is raised to
       min(ceil(264 / ctas), ceil(max_kv_len / 128), 256) if that is larger (2 per SM)
   or num_splits when given. So a graph captured with a max_kv_len bound stays valid for any
   kv_lens <= that bound. Kernels: the attention kernel (grid batch * num_kv_heads *
   ceil(group / 4) x splits), then the merge kernel when splits > 1, launched as a
   programmatic dependent of the first (cuLaunchKernelEx): it starts while the attention
   kernel drains and waits for its partials on the GPU (captured graphs keep that edge). The
   attention kernel allows dependents to launch as it starts (griddepcontrol.launch_dependents),
   so a kernel of yours launched right after a one-split call with programmatic stream
   serialization must wait (griddepcontrol.wait) before it reads o or lse, as PDL requires.
   Precision: fp32 scores, online softmax in fp32 (exp2 with log2(e) folded into the scale),
   fp32 accumulation, o rounded once (head_dim <= 128 with 2 to 4 heads per CTA, or any with
   an fp8 cache, uses tensor cores: the weights enter P V as two 16-bit parts, ~16 significant
   bits; with an fp8 cache they are f16 and q enters as f16 scaled by a power of two, exact
   for bf16 q of any range except elements over 2^31 times smaller than the largest |q| of
   the CTA's heads).
   fp8: k_scale is folded into q and v_scale into o.
   Query groups larger than 4 heads are split over ceil(group / 4) CTAs sharing the K/V reads
   through L2. */
typedef struct talon_decode_attention_args {
    CUdeviceptr o;              /* out: [batch, num_qo_heads, head_dim], dtype */
    CUdeviceptr lse;            /* out, optional (0: none): fp32 [batch, num_qo_heads] */
    CUdeviceptr q;              /* [batch, num_qo_heads, head_dim], dtype */
    CUdeviceptr k_cache, v_cache; /* [num_pages, page_size, Hk, head_dim] (layout), kv_dtype */
    CUdeviceptr page_table;     /* int32 [batch, page_table_stride] */
    CUdeviceptr kv_lens;        /* int32 [batch] */
    CUdeviceptr workspace;      /* 16-byte aligned; may be 0 when the workspace size is 0 */
    int64_t workspace_size;     /* bytes available at workspace */
    int64_t batch;              /* [1, 2^24] */
    int64_t num_qo_heads, num_kv_heads; /* [1, 1024]; num_qo_heads % num_kv_heads == 0 */
    int64_t head_dim;           /* 64, 128, 256 */
    int64_t page_size;          /* power of two in [1, 256] */
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
   page_table_stride < ceil(max_kv_len / page_size), workspace_size too small, bad scales.
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

/* ================================================================ kernel metadata
   The single source of truth for every kernel: the kernel sources instantiate from these
   lists, the dispatcher builds its launch table from them, and the tests check the cubins
   against them. Adding a variant is one line.
   X(symbol, body, dtype, vec, image, block, smem, params)
     body:   kernel template in kernels/<image>.cu and the op selector in the dispatcher
     dtype:  element type (BF16, F16); vec: elements per access (8 = 16-byte path)
     block:  threads per block (also a template constant of the kernel)
     smem:   dynamic shared memory bytes (0 where a kernel uses static shared memory only)
     params: the one by-value kernel parameter */
typedef struct talon__norm_params {
    CUdeviceptr out, in, residual, weight, bias;
    int64_t cols, out_stride, in_stride, residual_stride;
    float eps;
} talon__norm_params;

typedef struct talon__act_params {
    CUdeviceptr out, in;
    int64_t cols, out_stride, in_stride;
    int64_t chunks; /* blocks per row */
} talon__act_params;

#define TALON__IMAGES(X) X(norm) X(act) X(topk) X(rope) X(moe) X(router) X(decode)

/* Kernel bodies of each image: the dispatcher picks a kernel by (body, dtype, vec, block). */
#define TALON__BODIES_norm(X) X(rmsnorm) X(fused_add_rmsnorm) X(layernorm)
#define TALON__BODIES_act(X) X(silu_mul) X(gelu_erf_mul) X(gelu_tanh_mul)
#define TALON__BODIES_topk(X) \
    X(topk_sample) X(topk_select) X(topk_chunk_hist) X(topk_chunk_select)
#define TALON__BODIES_rope(X) X(rope_neox) X(rope_neox1) X(rope_gptj) X(kv_append) X(kv_append_fp8)
#define TALON__BODIES(X) \
    TALON__BODIES_norm(X) \
    TALON__BODIES_act(X) \
    TALON__BODIES_topk(X) \
    TALON__BODIES_rope(X) \
    TALON__BODIES_moe(X) \
    TALON__BODIES_router(X) \
    TALON__BODIES_decode(X)

/* Elements of a row each thread of a 16-byte-path norm block keeps on chip. Rows that fit a
   128-thread block (cols <= 128 * 32) take the _b128 variants: twice the bytes in flight per
   thread, measured 10-20% faster at 4096 columns; longer rows take 256 threads. */
#define TALON__NORM_CACHE 32

#define TALON__KERNELS_norm(X)                                                                 \
    X(talon_rmsnorm_bf16,             rmsnorm,           BF16, 1, norm, 256, 0, talon__norm_params) \
    X(talon_rmsnorm_bf16_v8,          rmsnorm,           BF16, 8, norm, 256, 0, talon__norm_params) \
    X(talon_rmsnorm_bf16_v8_b128,     rmsnorm,           BF16, 8, norm, 128, 0, talon__norm_params) \
    X(talon_rmsnorm_f16,              rmsnorm,           F16,  1, norm, 256, 0, talon__norm_params) \
    X(talon_rmsnorm_f16_v8,           rmsnorm,           F16,  8, norm, 256, 0, talon__norm_params) \
    X(talon_rmsnorm_f16_v8_b128,      rmsnorm,           F16,  8, norm, 128, 0, talon__norm_params) \
    X(talon_fused_add_rmsnorm_bf16,   fused_add_rmsnorm, BF16, 1, norm, 256, 0, talon__norm_params) \
    X(talon_fused_add_rmsnorm_bf16_v8, fused_add_rmsnorm, BF16, 8, norm, 256, 0, talon__norm_params) \
    X(talon_fused_add_rmsnorm_bf16_v8_b128, fused_add_rmsnorm, BF16, 8, norm, 128, 0, talon__norm_params) \
    X(talon_fused_add_rmsnorm_f16,    fused_add_rmsnorm, F16,  1, norm, 256, 0, talon__norm_params) \
    X(talon_fused_add_rmsnorm_f16_v8, fused_add_rmsnorm, F16,  8, norm, 256, 0, talon__norm_params) \
    X(talon_fused_add_rmsnorm_f16_v8_b128, fused_add_rmsnorm, F16,  8, norm, 128, 0, talon__norm_params) \
    X(talon_layernorm_bf16,           layernorm,         BF16, 1, norm, 256, 0, talon__norm_params) \
    X(talon_layernorm_bf16_v8,        layernorm,         BF16, 8, norm, 256, 0, talon__norm_params) \
    X(talon_layernorm_bf16_v8_b128,   layernorm,         BF16, 8, norm, 128, 0, talon__norm_params) \
    X(talon_layernorm_f16,            layernorm,         F16,  1, norm, 256, 0, talon__norm_params) \
    X(talon_layernorm_f16_v8,         layernorm,         F16,  8, norm, 256, 0, talon__norm_params) \
    X(talon_layernorm_f16_v8_b128,    layernorm,         F16,  8, norm, 128, 0, talon__norm_params)

#define TALON__KERNELS_act(X)                                                                  \
    X(talon_silu_and_mul_bf16,        silu_mul,          BF16, 1, act,  256, 0, talon__act_params) \
    X(talon_silu_and_mul_bf16_v8,     silu_mul,          BF16, 8, act,  256, 0, talon__act_params) \
    X(talon_silu_and_mul_f16,         silu_mul,          F16,  1, act,  256, 0, talon__act_params) \
    X(talon_silu_and_mul_f16_v8,      silu_mul,          F16,  8, act,  256, 0, talon__act_params) \
    X(talon_gelu_and_mul_bf16,        gelu_erf_mul,      BF16, 1, act,  256, 0, talon__act_params) \
    X(talon_gelu_and_mul_bf16_v8,     gelu_erf_mul,      BF16, 8, act,  256, 0, talon__act_params) \
    X(talon_gelu_and_mul_f16,         gelu_erf_mul,      F16,  1, act,  256, 0, talon__act_params) \
    X(talon_gelu_and_mul_f16_v8,      gelu_erf_mul,      F16,  8, act,  256, 0, talon__act_params) \
    X(talon_gelu_tanh_and_mul_bf16,   gelu_tanh_mul,     BF16, 1, act,  256, 0, talon__act_params) \
    X(talon_gelu_tanh_and_mul_bf16_v8, gelu_tanh_mul,    BF16, 8, act,  256, 0, talon__act_params) \
    X(talon_gelu_tanh_and_mul_f16,    gelu_tanh_mul,     F16,  1, act,  256, 0, talon__act_params) \
    X(talon_gelu_tanh_and_mul_f16_v8, gelu_tanh_mul,     F16,  8, act,  256, 0, talon__act_params)

/* top-k: 11-bit radix digits; per row the workspace holds (on the chunk path only) one
   histogram of the top digit per chunk of 4096 (16-bit counts), TALON__TOPK_CTRS counters and
   up to TALON__TOPK_CAP candidates (key bits, index). Shapes with rows x chunks (of 4096) <=
   TALON__TOPK_SMALL take the chunk path, larger ones the sampled path, whose threshold comes
   from TALON__TOPK_SAMPLE keys of each row (kernels/topk.cu says why). */
#define TALON__TOPK_DIGIT 11
#define TALON__TOPK_CTRS 16
#define TALON__TOPK_CAP 4096
#define TALON__TOPK_KMAX 1024
#define TALON__TOPK_COLS_MAX 262144
#define TALON__TOPK_ROWS_MAX 1024
#define TALON__TOPK_SMEM 53504
#define TALON__TOPK_SMALL 2048
#define TALON__TOPK_SAMPLE 8192
#define TALON__TOPK_PREFETCH 65536 /* bytes of its chunk a sampled-path select block prefetches */
#define TALON__TOPK_BLOCKS_PER_SM 3 /* the top-k kernels' launch bounds (kernels/topk.cu) */
#define TALON__TOPK_SLOTS (132 * TALON__TOPK_BLOCKS_PER_SM) /* select blocks resident at once */
typedef struct talon__topk_params {
    CUdeviceptr out_values, out_indices, in, workspace;
    int64_t in_stride, row_ints; /* row_ints: 4-byte words of workspace per row */
    int cols, k, chunk_len, chunks, cap, sorted;
} talon__topk_params;

#define TALON__KERNELS_topk(X)                                                                 \
    X(talon_topk_sample_f32,  topk_sample, F32,  1, topk, 512, 0, talon__topk_params)          \
    X(talon_topk_sample_bf16, topk_sample, BF16, 1, topk, 512, 0, talon__topk_params)          \
    X(talon_topk_sample_f16,  topk_sample, F16,  1, topk, 512, 0, talon__topk_params)          \
    X(talon_topk_select_f32,  topk_select, F32,  1, topk, 512, TALON__TOPK_SMEM, talon__topk_params) \
    X(talon_topk_select_bf16, topk_select, BF16, 1, topk, 512, TALON__TOPK_SMEM, talon__topk_params) \
    X(talon_topk_select_f16,  topk_select, F16,  1, topk, 512, TALON__TOPK_SMEM, talon__topk_params) \
    X(talon_topk_chunk_hist_f32,    topk_chunk_hist,   F32,  1, topk, 512, 0, talon__topk_params) \
    X(talon_topk_chunk_hist_bf16,   topk_chunk_hist,   BF16, 1, topk, 512, 0, talon__topk_params) \
    X(talon_topk_chunk_hist_f16,    topk_chunk_hist,   F16,  1, topk, 512, 0, talon__topk_params) \
    X(talon_topk_chunk_select_f32,  topk_chunk_select, F32,  1, topk, 512, TALON__TOPK_SMEM, talon__topk_params) \
    X(talon_topk_chunk_select_bf16, topk_chunk_select, BF16, 1, topk, 512, TALON__TOPK_SMEM, talon__topk_params) \
    X(talon_topk_chunk_select_f16,  topk_chunk_select, F16,  1, topk, 512, TALON__TOPK_SMEM, talon__topk_params)

/* talon_rope: one thread rotates VP pairs (a "vector": 8 on the NeoX 16-byte path, 4 on the
   GPT-J one, 1 element-wise) of up to G heads of one token; threads of a token = groups * vecs,
   groups = ceil(heads / G), heads = Hq + Hk. G = TALON__ROPE_HEADS, but 1 (rope_neox1, blocks of
   128 threads) on the NeoX 16-byte path with a cos/sin cache. 2 heads measured 2% faster than
   8 at 4096 tokens (Llama-3-8B shapes) and 17% at 64 (fewer registers); 1 head (H200, with the
   streaming stores, two runs): NeoX with a cache 1.02-1.03x at 4096 tokens, 1.01x at 32768,
   1.03x at 64, but NeoX theta 0.94x (its angles evaluated per head) and GPT-J 0.97-0.98x.
   rope_neox1 against blocks of 256 (its 40 registers: 6 blocks per SM), two runs each: blocks
   of 128 1.00x at 4096 tokens, 1.02x at 32768; of 512 0.98x and 0.94-0.95x; 8 blocks of 256
   per SM (32 registers, the theta code compiled out) 0.99x; 5 or 4 (shared memory reserved)
   0.94x and 0.92x. */
#define TALON__ROPE_HEADS 2
typedef struct talon__rope_params {
    CUdeviceptr q, k, positions, cos_sin;
    int64_t q_stride, k_stride, max_pos;
    double theta;                   /* theta mode */
    int32_t num_q_heads, heads, head_dim, rot_dim;
    uint32_t vecs;                  /* pair vectors per head: rot_dim / 2 / VP */
    uint32_t per_token;             /* threads per token */
    uint32_t threads;               /* tokens * per_token */
    int32_t pos64;                  /* positions are int64 */
} talon__rope_params;

/* talon_kv_append: a unit is VEC elements of k or v of one token; a thread moves
   TALON__KV_UNROLL units BLOCK apart (1: on the H200, T=4096 and 32768 tokens, Hk 8, D 128,
   the fp8 variant then dividing with __fdiv_rn took 13.97 -> 12.93 and 72.2 -> 68.9 us
   against 2, the plain copy the same within 1%; 4 was slower for both, as 4 and 8 were for
   fp8 on the H100. With a first form of the reciprocal division, 2 gave 11.66 and 58.0
   against 11.52 and 59.4). */
#define TALON__KV_UNROLL 1
typedef struct talon__kv_params {
    CUdeviceptr k_cache, v_cache, k, v, slots;
    int64_t k_stride, v_stride, num_slots, row; /* row = Hk * D */
    /* the cache (layout): element d of head h at slot o of page n at ((n page_rows + o)
       slot_stride + h head_stride + d), as decode's params (in elements here) */
    int64_t page_rows, slot_stride, head_stride;
    uint32_t head_dim, page_shift;
    /* token of a unit without a division: unit / (2 row_vecs) = (umulhi(unit, div_m) + unit)
       >> div_l, for units < 2^31 (the round-up method: div_l = ceil(log2(2 row_vecs))) */
    uint32_t div_m, div_l;
    uint32_t row_vecs;              /* units per token and tensor: row / VEC */
    uint32_t units;                 /* tokens * 2 * row_vecs */
    float quant[2][3];              /* fp8, k then v: mul, div, rcp (talon__fp8_quant) */
} talon__kv_params;

#define TALON__KERNELS_rope(X)                                                         \
    X(talon_rope_neox_bf16,          rope_neox,     BF16, 1, rope, 256, 0, talon__rope_params) \
    X(talon_rope_neox_bf16_v8,       rope_neox,     BF16, 8, rope, 256, 0, talon__rope_params) \
    X(talon_rope_neox_f16,           rope_neox,     F16,  1, rope, 256, 0, talon__rope_params) \
    X(talon_rope_neox_f16_v8,        rope_neox,     F16,  8, rope, 256, 0, talon__rope_params) \
    X(talon_rope_neox1_bf16_v8,      rope_neox1,    BF16, 8, rope, 128, 0, talon__rope_params) \
    X(talon_rope_neox1_f16_v8,       rope_neox1,    F16,  8, rope, 128, 0, talon__rope_params) \
    X(talon_rope_gptj_bf16,          rope_gptj,     BF16, 1, rope, 256, 0, talon__rope_params) \
    X(talon_rope_gptj_bf16_v8,       rope_gptj,     BF16, 8, rope, 256, 0, talon__rope_params) \
    X(talon_rope_gptj_f16,           rope_gptj,     F16,  1, rope, 256, 0, talon__rope_params) \
    X(talon_rope_gptj_f16_v8,        rope_gptj,     F16,  8, rope, 256, 0, talon__rope_params) \
    X(talon_kv_append_bf16,          kv_append,     BF16, 1, rope, 256, 0, talon__kv_params) \
    X(talon_kv_append_bf16_v8,       kv_append,     BF16, 8, rope, 256, 0, talon__kv_params) \
    X(talon_kv_append_f16,           kv_append,     F16,  1, rope, 256, 0, talon__kv_params) \
    X(talon_kv_append_f16_v8,        kv_append,     F16,  8, rope, 256, 0, talon__kv_params) \
    X(talon_kv_append_fp8_bf16,      kv_append_fp8, BF16, 1, rope, 256, 0, talon__kv_params) \
    X(talon_kv_append_fp8_bf16_v8,   kv_append_fp8, BF16, 8, rope, 256, 0, talon__kv_params) \
    X(talon_kv_append_fp8_f16,       kv_append_fp8, F16,  1, rope, 256, 0, talon__kv_params) \
    X(talon_kv_append_fp8_f16_v8,    kv_append_fp8, F16,  8, rope, 256, 0, talon__kv_params)

/* moe: the align kernels keep per-warp expert counts in shared memory. The register kernels
   (blocks of 512 threads, a thread per expert, up to MOE_ALIGN_*_MAX ids held in registers:
   small as one block, sliced as independent blocks each writing a slice of the outputs, c8 and
   c8w as a cluster of 8) rank with per-warp mask rows and stage
   their block's ids; above MOE_ALIGN_C8W_MAX ids the x8 cluster (1024 threads, rows padded by
   one against bank conflicts) loops over its ids and stages up to MOE_ALIGN_STAGE_X8 per block. */
#define TALON__MOE_MAX_EXPERTS 512
#define TALON__MOE_ALIGN_WARPS 32
#define TALON__MOE_ALIGN_STAGE_X8 16384
#define TALON__MOE_ALIGN_SMEM(stage)                                                           \
    (4 * (TALON__MOE_ALIGN_WARPS * (TALON__MOE_MAX_EXPERTS + 1) + 5 * TALON__MOE_MAX_EXPERTS + 1 + \
          2 * (stage)))
#define TALON__MOE_ALIGN_CLUSTER 8
#define TALON__MOE_ALIGN_REGS_WARPS 16
#define TALON__MOE_ALIGN_SMALL_MAX 2048
/* Up to SMALL_MAX ids: a block per SLICE slots of sorted_token_ids, at most SLICES_MAX; one
   block takes the small kernel, more the sliced one. */
#define TALON__MOE_ALIGN_SLICE 2048
#define TALON__MOE_ALIGN_SLICES_MAX 64
#define TALON__MOE_ALIGN_C8_MAX 32768
#define TALON__MOE_ALIGN_C8W_MAX 131072
#define TALON__MOE_MAX2(a, b) ((a) > (b) ? (a) : (b))
/* 16-bit rows, then one region: the mask rows while ranking, afterwards 5 arrays of experts,
   the warp sums and the stage of a block's ids (+ 16-bit offsets above 4096 ids) */
#define TALON__MOE_ALIGN_REGS_SMEM(ids)                                                        \
    (2 * TALON__MOE_ALIGN_REGS_WARPS * TALON__MOE_MAX_EXPERTS +                                \
     TALON__MOE_MAX2(4 * TALON__MOE_ALIGN_REGS_WARPS * TALON__MOE_MAX_EXPERTS,                  \
                     4 * (5 * TALON__MOE_MAX_EXPERTS + 2 * (TALON__MOE_ALIGN_REGS_WARPS + 1) + (ids)) + \
                         ((ids) > 4096 ? 2 * (ids) : 0)))

typedef struct talon__moe_align_params {
    CUdeviceptr sorted, expert_ids, num_post, topk_ids;
    int64_t sorted_capacity, expert_ids_capacity;
    int numel, experts, block_size;
    int chunk; /* ids per warp, a multiple of 32 */
    /* slots of sorted (a multiple of 4) and of expert_ids per block of the sliced kernel; 0
       for the others */
    int64_t sorted_slice, expert_ids_slice;
} talon__moe_align_params;

typedef struct talon__moe_sum_params {
    CUdeviceptr out, in, weights;
    int64_t hidden;
    int k;
    int chunks; /* blocks per token */
} talon__moe_sum_params;

#define TALON__BODIES_moe(X) X(moe_align_small) X(moe_align_sliced) X(moe_align_c8) X(moe_align_c8w) X(moe_align_x8) X(moe_sum) \
    X(moe_sum_r2) X(moe_sum_r4)

#define TALON__KERNELS_moe(X)                                                                  \
    X(talon_moe_align_block_size_i32_small, moe_align_small, I32, 1, moe, 512, TALON__MOE_ALIGN_REGS_SMEM(TALON__MOE_ALIGN_SMALL_MAX), talon__moe_align_params) \
    X(talon_moe_align_block_size_i32_sliced, moe_align_sliced, I32, 1, moe, 512, TALON__MOE_ALIGN_REGS_SMEM(TALON__MOE_ALIGN_SMALL_MAX), talon__moe_align_params) \
    X(talon_moe_align_block_size_i32_c8, moe_align_c8,  I32,  1, moe,  512, TALON__MOE_ALIGN_REGS_SMEM(TALON__MOE_ALIGN_C8_MAX / 8), talon__moe_align_params) \
    X(talon_moe_align_block_size_i32_c8w, moe_align_c8w, I32, 1, moe,  512, TALON__MOE_ALIGN_REGS_SMEM(TALON__MOE_ALIGN_C8W_MAX / 8), talon__moe_align_params) \
    X(talon_moe_align_block_size_i32_x8, moe_align_x8, I32,  1, moe, 1024, TALON__MOE_ALIGN_SMEM(TALON__MOE_ALIGN_STAGE_X8), talon__moe_align_params) \
    X(talon_moe_sum_bf16,             moe_sum,      BF16, 1, moe,  256, 0, talon__moe_sum_params) \
    X(talon_moe_sum_bf16_v8,          moe_sum,      BF16, 8, moe,  256, 0, talon__moe_sum_params) \
    X(talon_moe_sum_f16,              moe_sum,      F16,  1, moe,  256, 0, talon__moe_sum_params) \
    X(talon_moe_sum_f16_v8,           moe_sum,      F16,  8, moe,  256, 0, talon__moe_sum_params) \
    X(talon_moe_sum_bf16_v8_r2,       moe_sum_r2,   BF16, 8, moe,  256, 0, talon__moe_sum_params) \
    X(talon_moe_sum_f16_v8_r2,        moe_sum_r2,   F16,  8, moe,  256, 0, talon__moe_sum_params) \
    X(talon_moe_sum_bf16_v8_r4,       moe_sum_r4,   BF16, 8, moe,  256, 0, talon__moe_sum_params) \
    X(talon_moe_sum_f16_v8_r4,        moe_sum_r4,   F16,  8, moe,  256, 0, talon__moe_sum_params)

typedef struct talon__router_params {
    CUdeviceptr logits, bias, weights, ids;
    int64_t tokens, logits_stride;
    int experts, k, scoring, renormalize;
} talon__router_params;

/* MoE router: one warp per token, 4 tokens per block. The body names the experts a warp
   holds (4, 8 or 16 per lane); vec 4 (f32) or 8 (bf16, f16) is the 16-byte load path. The
   router_softmax bodies are the same kernel compiled for softmax scoring without a correction
   bias, the common case, which then has no branches on either. */
#define TALON__ROUTER_TOKENS_PER_BLOCK 4
#define TALON__BODIES_router(X)                                                                \
    X(router_e128) X(router_e256) X(router_e512)                                               \
    X(router_softmax_e128) X(router_softmax_e256) X(router_softmax_e512)
#define TALON__ROUTER_ROWS(X, name, body)                                                      \
    X(name##_f32_e128,     body##_e128, F32,  1, router, 128, 0, talon__router_params)         \
    X(name##_f32_e256,     body##_e256, F32,  1, router, 128, 0, talon__router_params)         \
    X(name##_f32_e512,     body##_e512, F32,  1, router, 128, 0, talon__router_params)         \
    X(name##_f32_v4_e128,  body##_e128, F32,  4, router, 128, 0, talon__router_params)         \
    X(name##_f32_v4_e256,  body##_e256, F32,  4, router, 128, 0, talon__router_params)         \
    X(name##_f32_v4_e512,  body##_e512, F32,  4, router, 128, 0, talon__router_params)         \
    X(name##_bf16_e128,    body##_e128, BF16, 1, router, 128, 0, talon__router_params)         \
    X(name##_bf16_e256,    body##_e256, BF16, 1, router, 128, 0, talon__router_params)         \
    X(name##_bf16_e512,    body##_e512, BF16, 1, router, 128, 0, talon__router_params)         \
    X(name##_bf16_v8_e256, body##_e256, BF16, 8, router, 128, 0, talon__router_params)         \
    X(name##_bf16_v8_e512, body##_e512, BF16, 8, router, 128, 0, talon__router_params)         \
    X(name##_f16_e128,     body##_e128, F16,  1, router, 128, 0, talon__router_params)         \
    X(name##_f16_e256,     body##_e256, F16,  1, router, 128, 0, talon__router_params)         \
    X(name##_f16_e512,     body##_e512, F16,  1, router, 128, 0, talon__router_params)         \
    X(name##_f16_v8_e256,  body##_e256, F16,  8, router, 128, 0, talon__router_params)         \
    X(name##_f16_v8_e512,  body##_e512, F16,  8, router, 128, 0, talon__router_params)
#define TALON__KERNELS_router(X)                                                               \
    TALON__ROUTER_ROWS(X, talon_moe_router_topk, router)                                       \
    TALON__ROUTER_ROWS(X, talon_moe_router_topk_softmax, router_softmax)

/* Decode attention: the attention kernel (one CTA per request x kv head x head chunk x split)
   and the merge of n states (i at v0 + i * v_step bytes, lse at s0 + i * s_step). */
typedef struct talon__decode_params {
    CUdeviceptr o, lse, q, k, v, page_table, kv_lens;
    CUdeviceptr part_o, part_lse; /* 0: one split, write o and lse directly */
    int64_t page_table_stride, rows; /* rows = batch * num_qo_heads */
    /* the cache (layout): slot o of page n of head h at ((n page_rows + o) slot_stride +
       h head_stride) bytes; each < 2^28 */
    int page_rows, slot_stride, head_stride;
    int num_kv_heads, group, heads_per_cta, head_chunks, page_shift, max_kv_len, window, splits;
    float q_scale;              /* sm_scale * k_scale * (cap ? 1 / cap : log2 e) */
    float cap;                  /* cap * log2 e, 0: no soft-cap */
    float v_scale;
} talon__decode_params;

typedef struct talon__merge_params {
    CUdeviceptr o, lse, v0, s0;
    int64_t v_step, s_step, rows, head_dim, n;
} talon__merge_params;
#define TALON__DECODE_MERGE_LANES 8 /* threads per 8 output elements in merge_splits */

#define TALON__BODIES_decode(X)                                                                \
    X(decode_g1) X(decode_g2) X(decode_g4) X(decode_fp8_g1) X(decode_fp8_g2) X(decode_fp8_g4)  \
    X(merge_splits) X(merge_states)

/* One row per head_dim x heads per CTA; vec holds head_dim. smem: the K/V ring. The
   tensor-core kernel (fp8 caches; 16-bit ones at d64/d128 g2/g4): 2 steps x K and V x 4 warps x
   2 KB = 32 KB; the per-lane one: 3 steps x K and V x 4 keys x 128 threads x 16 bytes = 48 KB.
   `smem` is the d64/d128 g2/g4 rows', `other` that of the g1 and d256 rows. */
#define TALON__DECODE_ROWS(X, name, DT, body, smem, other)                                     \
    X(name##_d64_g1, body##_g1, DT, 64, decode, 128, other, talon__decode_params)              \
    X(name##_d64_g2, body##_g2, DT, 64, decode, 128, smem, talon__decode_params)               \
    X(name##_d64_g4, body##_g4, DT, 64, decode, 128, smem, talon__decode_params)               \
    X(name##_d128_g1, body##_g1, DT, 128, decode, 128, other, talon__decode_params)            \
    X(name##_d128_g2, body##_g2, DT, 128, decode, 128, smem, talon__decode_params)             \
    X(name##_d128_g4, body##_g4, DT, 128, decode, 128, smem, talon__decode_params)             \
    X(name##_d256_g1, body##_g1, DT, 256, decode, 128, other, talon__decode_params)            \
    X(name##_d256_g2, body##_g2, DT, 256, decode, 128, other, talon__decode_params)            \
    X(name##_d256_g4, body##_g4, DT, 256, decode, 128, other, talon__decode_params)

#define TALON__KERNELS_decode(X)                                                               \
    TALON__DECODE_ROWS(X, talon_decode_attention_bf16, BF16, decode, 32768, 49152)             \
    TALON__DECODE_ROWS(X, talon_decode_attention_f16, F16, decode, 32768, 49152)               \
    TALON__DECODE_ROWS(X, talon_decode_attention_bf16_kvfp8, BF16, decode_fp8, 32768, 32768)   \
    TALON__DECODE_ROWS(X, talon_decode_attention_f16_kvfp8, F16, decode_fp8, 32768, 32768)     \
    X(talon_merge_splits_bf16,  merge_splits, BF16, 8, decode, 128, 0, talon__merge_params)    \
    X(talon_merge_splits_f16,   merge_splits, F16,  8, decode, 128, 0, talon__merge_params)    \
    X(talon_merge_states_bf16,  merge_states, BF16, 8, decode, 128, 0, talon__merge_params)    \
    X(talon_merge_states_f16,   merge_states, F16,  8, decode, 128, 0, talon__merge_params)

#define TALON__KERNELS(X) \
    TALON__KERNELS_norm(X) \
    TALON__KERNELS_act(X) \
    TALON__KERNELS_topk(X) \
    TALON__KERNELS_rope(X) \
    TALON__KERNELS_moe(X) \
    TALON__KERNELS_router(X) \
    TALON__KERNELS_decode(X)

#ifdef __cplusplus
}
#endif
#endif /* TALON_H */

/* ================================================================ implementation */
#if defined(TALON_IMPLEMENTATION) && !defined(TALON__IMPLEMENTED)
#define TALON__IMPLEMENTED

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "talon_cubins.h" /* generated: embedded images and build facts */

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
   tests/driver_abi_check.c checks they agree at compile time). Asking for the header's CUDA_VERSION instead would hand back newer
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
    X(cuGetErrorName, 6000, (CUresult error, const char **str))                                \
    X(cuGetErrorString, 6000, (CUresult error, const char **str))

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

/* ---------------------------------------------------------------- bundle */
enum {
#define TALON__IMAGE_ENUM(img) TALON__IMG_##img,
    TALON__IMAGES(TALON__IMAGE_ENUM)
#undef TALON__IMAGE_ENUM
    TALON__NUM_IMAGES
};

enum {
#define TALON__KERNEL_ENUM(sym, body, dt, vec, img, block, smem, P) TALON__K_##sym,
    TALON__KERNELS(TALON__KERNEL_ENUM)
#undef TALON__KERNEL_ENUM
    TALON__NUM_KERNELS
};

typedef enum talon__body {
#define TALON__BODY_ENUM(body) TALON__B_##body,
    TALON__BODIES(TALON__BODY_ENUM)
#undef TALON__BODY_ENUM
    TALON__NUM_BODIES
} talon__body;

typedef struct talon__kernel {
    const char *symbol;
    talon__body body;
    talon_dtype dtype;
    int vec, image, block, smem, param_size;
} talon__kernel;

static const talon__kernel talon__kernels[TALON__NUM_KERNELS] = {
#define TALON__KERNEL_ROW(sym, body, dt, vec, img, block, smem, P) \
    {#sym, TALON__B_##body, TALON_DTYPE_##dt, vec, TALON__IMG_##img, block, smem, (int)sizeof(P)},
    TALON__KERNELS(TALON__KERNEL_ROW)
#undef TALON__KERNEL_ROW
};

static const struct talon__image { const char *name; const unsigned char *data; size_t size; }
    talon__images[TALON__NUM_IMAGES] = {
#define TALON__IMAGE_ROW(img) {#img, talon__image_##img, sizeof talon__image_##img},
        TALON__IMAGES(TALON__IMAGE_ROW)
#undef TALON__IMAGE_ROW
};

static const char *const talon__kernel_names[TALON__NUM_KERNELS] = {
#define TALON__KERNEL_NAME(sym, body, dt, vec, img, block, smem, P) #sym,
    TALON__KERNELS(TALON__KERNEL_NAME)
#undef TALON__KERNEL_NAME
};

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
    pthread_mutex_t lock;
    CUmodule modules[TALON__NUM_IMAGES];     /* written under lock */
    CUfunction functions[TALON__NUM_KERNELS]; /* published with release, read with acquire */
};

/* Loads one image and resolves all its kernels; caller holds ctx->lock. Nothing is published
   until every kernel resolved: the lock-free fast path in talon__launch would otherwise launch
   a handle into a module that a later failure unloaded. */
static talon_status talon__load_image(talon_ctx *ctx, int image) {
    const talon__driver *d = ctx->drv;
    CUfunction fns[TALON__NUM_KERNELS] = {0};
    CUmodule module;
    CUcontext prev;
    CUresult r;
    int k;
    char what[96];
    if (ctx->modules[image]) return TALON_SUCCESS;
    if ((r = d->cuCtxPushCurrent(ctx->cu)) != CUDA_SUCCESS)
        return talon__fail_cu(d, TALON_ERROR_DRIVER, r, "cuCtxPushCurrent");
    r = d->cuModuleLoadData(&module, talon__images[image].data);
    if (r != CUDA_SUCCESS) {
        d->cuCtxPopCurrent(&prev);
        snprintf(what, sizeof what, "cuModuleLoadData(image \"%s\", %zu bytes)",
                 talon__images[image].name, talon__images[image].size);
        return talon__fail_cu(d, TALON_ERROR_MODULE_LOAD, r, what);
    }
    for (k = 0; k < TALON__NUM_KERNELS; k++) {
        const talon__kernel *kd = &talon__kernels[k];
        if (kd->image != image) continue;
        snprintf(what, sizeof what, "cuModuleGetFunction(\"%s\")", kd->symbol);
        r = d->cuModuleGetFunction(&fns[k], module, kd->symbol);
        if (r == CUDA_SUCCESS && kd->smem > 48 * 1024) {
            snprintf(what, sizeof what, "cuFuncSetAttribute(\"%s\")", kd->symbol);
            r = d->cuFuncSetAttribute(fns[k], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      kd->smem);
        }
        if (r != CUDA_SUCCESS) {
            d->cuModuleUnload(module);
            d->cuCtxPopCurrent(&prev);
            return talon__fail_cu(d, TALON_ERROR_MODULE_LOAD, r, what);
        }
    }
    d->cuCtxPopCurrent(&prev);
    for (k = 0; k < TALON__NUM_KERNELS; k++)
        if (talon__kernels[k].image == image)
            __atomic_store_n(&ctx->functions[k], fns[k], __ATOMIC_RELEASE);
    ctx->modules[image] = module;
    return TALON_SUCCESS;
}

talon_status talon_ctx_preload(talon_ctx *ctx) {
    talon_status s = TALON_SUCCESS;
    int i;
    if (!ctx) return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "talon_ctx_preload: ctx is NULL");
    pthread_mutex_lock(&ctx->lock);
    for (i = 0; i < TALON__NUM_IMAGES && s == TALON_SUCCESS; i++) s = talon__load_image(ctx, i);
    pthread_mutex_unlock(&ctx->lock);
    return s;
}

talon_status talon_ctx_create(talon_ctx **out, const talon_ctx_options *options) {
    static const talon_ctx_options defaults = {NULL, 0};
    const talon_ctx_options *o = options ? options : &defaults;
    const talon__driver *d;
    talon_ctx *ctx;
    CUcontext cu = o->context, prev;
    CUdevice dev;
    CUresult r;
    int major = 0, minor = 0;
    char name[128];
    talon_status s;

    if (!out) return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "talon_ctx_create: out is NULL");
    *out = NULL;
    if (o->flags & ~(unsigned)TALON_CTX_PRELOAD)
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
    r = d->cuCtxGetDevice(&dev);
    if (r == CUDA_SUCCESS)
        r = d->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    if (r == CUDA_SUCCESS)
        r = d->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    if (r == CUDA_SUCCESS) r = d->cuDeviceGetName(name, (int)sizeof name, dev);
    d->cuCtxPopCurrent(&prev);
    if (r != CUDA_SUCCESS)
        return talon__fail_cu(d, TALON_ERROR_DRIVER, r, "talon_ctx_create: querying the device");
    if (major != 9 || minor != 0)
        return talon__fail(TALON_ERROR_UNSUPPORTED_DEVICE,
                           "talon_ctx_create: device %d \"%s\" is sm_%d%d; talon's cubins are "
                           "sm_90a and run only on sm_90 (H100/H200)",
                           (int)dev, name, major, minor);
    if (!(ctx = (talon_ctx *)calloc(1, sizeof *ctx)))
        return talon__fail(TALON_ERROR_OUT_OF_MEMORY, "talon_ctx_create: calloc(%zu) failed",
                           sizeof *ctx);
    ctx->drv = d;
    ctx->cu = cu;
    pthread_mutex_init(&ctx->lock, NULL);
    if ((o->flags & TALON_CTX_PRELOAD) && (s = talon_ctx_preload(ctx)) != TALON_SUCCESS) {
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
        ctx->drv->cuCtxPopCurrent(&prev);
    }
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

/* ---------------------------------------------------------------- launch */
/* Picks the kernel for (body, dtype, vec, block); the table is small, a scan costs
   nanoseconds. */
static int talon__pick(talon__body body, talon_dtype dtype, int vec, int block) {
    int k;
    for (k = 0; k < TALON__NUM_KERNELS; k++)
        if (talon__kernels[k].body == body && talon__kernels[k].dtype == dtype &&
            talon__kernels[k].vec == vec && talon__kernels[k].block == block)
            return k;
    return -1;
}

/* Launches kernel k on a grid_x x grid_y grid with the table's block and shared memory; with
   `dependent`, as a programmatic dependent of the stream's previous kernel
   (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION), so its launch overlaps that kernel's
   end; the kernel must wait for the previous one's results itself (griddepcontrol.wait). */
static talon_status talon__launch_ex(talon_ctx *ctx, CUstream stream, const char *op, int k,
                                     int64_t grid_x, int64_t grid_y, void *params, int dependent) {
    const talon__driver *d = ctx->drv;
    const talon__kernel *kd = &talon__kernels[k];
    CUfunction f = __atomic_load_n(&ctx->functions[k], __ATOMIC_ACQUIRE);
    CUresult r;
    void *argv[1];
    char what[96];
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
        s = talon__load_image(ctx, kd->image);
        pthread_mutex_unlock(&ctx->lock);
        if (s != TALON_SUCCESS) return s;
        f = __atomic_load_n(&ctx->functions[k], __ATOMIC_ACQUIRE);
    }
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

static talon_status talon__launch2d(talon_ctx *ctx, CUstream stream, const char *op, int k,
                                    int64_t grid_x, int64_t grid_y, void *params) {
    return talon__launch_ex(ctx, stream, op, k, grid_x, grid_y, params, 0);
}

static talon_status talon__launch(talon_ctx *ctx, CUstream stream, const char *op, int k,
                                  int64_t blocks, void *params) {
    return talon__launch2d(ctx, stream, op, k, blocks, 1, params);
}

/* ---------------------------------------------------------------- validation */
#define TALON__GRID_MAX 2147483647LL

static talon_status talon__check_common(const char *op, const void *ctx, const void *args) {
    if (!ctx) return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: ctx is NULL", op);
    if (!args) return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args is NULL", op);
    return TALON_SUCCESS;
}

static talon_status talon__check_dtype(const char *op, talon_dtype t) {
    if (t == TALON_DTYPE_BF16 || t == TALON_DTYPE_F16) return TALON_SUCCESS;
    return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                       "%s: args->dtype = %d is not supported (bf16 = %d, f16 = %d)", op, (int)t,
                       (int)TALON_DTYPE_BF16, (int)TALON_DTYPE_F16);
}

/* The smallest l with 2^l >= v (log2 of a power of two). */
static uint32_t talon__ceil_log2(uint64_t v) {
    uint32_t l = 0;
    while ((1ull << l) < v) l++;
    return l;
}

/* The paged cache's geometry for `layout` (kv_append, decode): s[0] rows of s[1] per page (a
   slot's row in NHD, a head's in HND), s[1] the stride between slots of a page and s[2] between
   kv heads, in units of one head's row (unit: D elements or D * element bytes). */
static talon_status talon__kv_strides(const char *op, talon_kv_layout layout, int64_t page_size,
                                      int64_t heads, int64_t unit, int64_t s[3]) {
    s[0] = layout == TALON_KV_NHD ? page_size : page_size * heads;
    s[1] = layout == TALON_KV_NHD ? heads * unit : unit;
    s[2] = layout == TALON_KV_NHD ? unit : page_size * unit;
    if (layout == TALON_KV_NHD || layout == TALON_KV_HND) return TALON_SUCCESS;
    return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                       "%s: args->layout = %d is not supported (TALON_KV_NHD = %d, "
                       "TALON_KV_HND = %d)", op, (int)layout, (int)TALON_KV_NHD,
                       (int)TALON_KV_HND);
}

/* The data types of the ops that also take fp32 (logits, scores); *size gets the element's
   bytes. */
static talon_status talon__check_dtype_f32(const char *op, const char *name, talon_dtype t,
                                           int *size) {
    *size = t == TALON_DTYPE_F32 ? 4 : 2;
    if (t == TALON_DTYPE_F32 || t == TALON_DTYPE_BF16 || t == TALON_DTYPE_F16)
        return TALON_SUCCESS;
    return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                       "%s: args->%s = %d is not supported (bf16 = %d, f16 = %d, f32 = %d)", op,
                       name, (int)t, (int)TALON_DTYPE_BF16, (int)TALON_DTYPE_F16,
                       (int)TALON_DTYPE_F32);
}

/* Device pointers must be non-NULL (unless optional) and aligned to their element. */
static talon_status talon__check_ptr_align(const char *op, const char *name, CUdeviceptr p,
                                           int optional, int align) {
    if (!p && !optional)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->%s is NULL", op, name);
    if (p % (CUdeviceptr)align)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->%s = 0x%llx is not aligned to the %d-byte element", op,
                           name, (unsigned long long)p, align);
    return TALON_SUCCESS;
}

static talon_status talon__check_ptr(const char *op, const char *name, CUdeviceptr p,
                                     int optional) {
    return talon__check_ptr_align(op, name, p, optional, 2);
}


static talon_status talon__check_size(const char *op, const char *name, int64_t v, int64_t max) {
    if (v < 1 || v > max)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->%s = %lld is out of range [1, %lld]", op, name,
                           (long long)v, (long long)max);
    return TALON_SUCCESS;
}

/* Resolves a row stride (0 = min) into *out; a stride shorter than a row is an error. */
static talon_status talon__check_stride(const char *op, const char *name, int64_t stride,
                                        int64_t min, int64_t *out) {
    *out = stride ? stride : min;
    if (stride && stride < min)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->%s = %lld is shorter than a row (%lld elements)", op, name,
                           (long long)stride, (long long)min);
    return TALON_SUCCESS;
}

/* The 16-byte path: every pointer 16-byte aligned and every length a multiple of 8. */
static int talon__vec8(const CUdeviceptr *ptrs, int nptrs, const int64_t *lens, int nlens) {
    int i;
    for (i = 0; i < nptrs; i++)
        if (ptrs[i] % 16) return 0;
    for (i = 0; i < nlens; i++)
        if (lens[i] % 8) return 0;
    return 1;
}

#define TALON__TRY(expr)                                                                       \
    do {                                                                                       \
        talon_status talon__s = (expr);                                                        \
        if (talon__s != TALON_SUCCESS) return talon__s;                                        \
    } while (0)

/* ---------------------------------------------------------------- norms */
/* Shared by the three norms: validates the row geometry and launches one block per row. */
static talon_status talon__norm(talon_ctx *ctx, CUstream stream, const char *op,
                                talon__body body, talon_dtype dtype, int64_t rows,
                                talon__norm_params *p) {
    CUdeviceptr ptrs[5];
    int64_t lens[4];
    int n = 0, vec, k;
    TALON__TRY(talon__check_dtype(op, dtype));
    TALON__TRY(talon__check_size(op, "rows", rows, TALON__GRID_MAX));
    ptrs[n++] = p->out;
    ptrs[n++] = p->in;
    ptrs[n++] = p->weight;
    if (p->residual) ptrs[n++] = p->residual;
    if (p->bias) ptrs[n++] = p->bias;
    lens[0] = p->cols; lens[1] = p->out_stride; lens[2] = p->in_stride;
    lens[3] = p->residual_stride;
    vec = talon__vec8(ptrs, n, lens, 4) ? 8 : 1;
    k = talon__pick(body, dtype, vec, vec == 8 && p->cols <= 128 * TALON__NORM_CACHE ? 128 : 256);
    return talon__launch(ctx, stream, op, k, rows, p);
}

talon_status talon_rmsnorm(talon_ctx *ctx, CUstream stream, const talon_rmsnorm_args *a) {
    static const char op[] = "talon_rmsnorm";
    talon__norm_params p;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_ptr(op, "out", a->out, 0));
    TALON__TRY(talon__check_ptr(op, "in", a->in, 0));
    TALON__TRY(talon__check_ptr(op, "weight", a->weight, 0));
    memset(&p, 0, sizeof p);
    p.out = a->out; p.in = a->in; p.weight = a->weight; p.cols = a->cols; p.eps = a->eps;
    TALON__TRY(talon__check_size(op, "cols", a->cols, INT64_MAX / 2));
    TALON__TRY(talon__check_stride(op, "out_stride", a->out_stride, a->cols, &p.out_stride));
    TALON__TRY(talon__check_stride(op, "in_stride", a->in_stride, a->cols, &p.in_stride));
    return talon__norm(ctx, stream, op, TALON__B_rmsnorm, a->dtype, a->rows, &p);
}

talon_status talon_fused_add_rmsnorm(talon_ctx *ctx, CUstream stream,
                                     const talon_fused_add_rmsnorm_args *a) {
    static const char op[] = "talon_fused_add_rmsnorm";
    talon__norm_params p;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_ptr(op, "in", a->in, 0));
    TALON__TRY(talon__check_ptr(op, "residual", a->residual, 0));
    TALON__TRY(talon__check_ptr(op, "weight", a->weight, 0));
    memset(&p, 0, sizeof p);
    p.out = a->in; p.in = a->in; p.residual = a->residual; p.weight = a->weight;
    p.cols = a->cols; p.eps = a->eps;
    TALON__TRY(talon__check_size(op, "cols", a->cols, INT64_MAX / 2));
    TALON__TRY(talon__check_stride(op, "in_stride", a->in_stride, a->cols, &p.in_stride));
    TALON__TRY(talon__check_stride(op, "residual_stride", a->residual_stride, a->cols,
                                   &p.residual_stride));
    p.out_stride = p.in_stride;
    return talon__norm(ctx, stream, op, TALON__B_fused_add_rmsnorm, a->dtype, a->rows, &p);
}

talon_status talon_layernorm(talon_ctx *ctx, CUstream stream, const talon_layernorm_args *a) {
    static const char op[] = "talon_layernorm";
    talon__norm_params p;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_ptr(op, "out", a->out, 0));
    TALON__TRY(talon__check_ptr(op, "in", a->in, 0));
    TALON__TRY(talon__check_ptr(op, "weight", a->weight, 0));
    TALON__TRY(talon__check_ptr(op, "bias", a->bias, 1));
    memset(&p, 0, sizeof p);
    p.out = a->out; p.in = a->in; p.weight = a->weight; p.bias = a->bias;
    p.cols = a->cols; p.eps = a->eps;
    TALON__TRY(talon__check_size(op, "cols", a->cols, INT64_MAX / 2));
    TALON__TRY(talon__check_stride(op, "out_stride", a->out_stride, a->cols, &p.out_stride));
    TALON__TRY(talon__check_stride(op, "in_stride", a->in_stride, a->cols, &p.in_stride));
    return talon__norm(ctx, stream, op, TALON__B_layernorm, a->dtype, a->rows, &p);
}

/* ---------------------------------------------------------------- gated activations */
static talon_status talon__gated(talon_ctx *ctx, CUstream stream, const char *op,
                                 talon__body body, CUdeviceptr out, CUdeviceptr in,
                                 int64_t rows, int64_t cols, int64_t out_stride,
                                 int64_t in_stride, talon_dtype dtype) {
    talon__act_params p;
    CUdeviceptr ptrs[2];
    int64_t lens[3];
    int vec, k;
    TALON__TRY(talon__check_ptr(op, "out", out, 0));
    TALON__TRY(talon__check_ptr(op, "in", in, 0));
    TALON__TRY(talon__check_size(op, "rows", rows, TALON__GRID_MAX));
    TALON__TRY(talon__check_size(op, "cols", cols, INT64_MAX / 4));
    memset(&p, 0, sizeof p);
    p.out = out; p.in = in; p.cols = cols;
    TALON__TRY(talon__check_stride(op, "out_stride", out_stride, cols, &p.out_stride));
    TALON__TRY(talon__check_stride(op, "in_stride", in_stride, 2 * cols, &p.in_stride));
    TALON__TRY(talon__check_dtype(op, dtype));
    ptrs[0] = out; ptrs[1] = in;
    lens[0] = cols; lens[1] = p.out_stride; lens[2] = p.in_stride;
    vec = talon__vec8(ptrs, 2, lens, 3) ? 8 : 1;
    k = talon__pick(body, dtype, vec, 256);
    p.chunks = (cols + (int64_t)talon__kernels[k].block * vec - 1) /
               ((int64_t)talon__kernels[k].block * vec);
    if (p.chunks > TALON__GRID_MAX / rows)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->rows = %lld with args->cols = %lld needs %.0f blocks, more "
                           "than the grid limit %lld",
                           op, (long long)rows, (long long)cols, (double)p.chunks * (double)rows,
                           TALON__GRID_MAX);
    return talon__launch(ctx, stream, op, k, rows * p.chunks, &p);
}

talon_status talon_silu_and_mul(talon_ctx *ctx, CUstream stream,
                                const talon_silu_and_mul_args *a) {
    static const char op[] = "talon_silu_and_mul";
    TALON__TRY(talon__check_common(op, ctx, a));
    return talon__gated(ctx, stream, op, TALON__B_silu_mul, a->out, a->in, a->rows, a->cols,
                        a->out_stride, a->in_stride, a->dtype);
}

talon_status talon_gelu_and_mul(talon_ctx *ctx, CUstream stream,
                                const talon_gelu_and_mul_args *a) {
    static const char op[] = "talon_gelu_and_mul";
    TALON__TRY(talon__check_common(op, ctx, a));
    if (a->approx != TALON_GELU_ERF && a->approx != TALON_GELU_TANH)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->approx = %d is not TALON_GELU_ERF (0) or TALON_GELU_TANH (1)",
                           op, (int)a->approx);
    return talon__gated(ctx, stream, op,
                        a->approx == TALON_GELU_TANH ? TALON__B_gelu_tanh_mul : TALON__B_gelu_erf_mul,
                        a->out, a->in, a->rows, a->cols, a->out_stride, a->in_stride, a->dtype);
}

/* ---------------------------------------------------------------- MoE routing */
talon_status talon_moe_router_topk(talon_ctx *ctx, CUstream stream,
                                   const talon_moe_router_topk_args *a) {
    static const char op[] = "talon_moe_router_topk";
    static const talon__body bodies[2][3] = { /* [softmax without a bias][experts per lane] */
        {TALON__B_router_e128, TALON__B_router_e256, TALON__B_router_e512},
        {TALON__B_router_softmax_e128, TALON__B_router_softmax_e256, TALON__B_router_softmax_e512}};
    talon__router_params p;
    int esize, vec, per_lane, k;
    talon__body body;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_dtype_f32(op, "logits_dtype", a->logits_dtype, &esize));
    if (a->scoring != TALON_ROUTER_SOFTMAX && a->scoring != TALON_ROUTER_SIGMOID)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->scoring = %d is not TALON_ROUTER_SOFTMAX (0) or "
                           "TALON_ROUTER_SIGMOID (1)", op, (int)a->scoring);
    if (a->renormalize != 0 && a->renormalize != 1)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->renormalize = %d is not 0 or 1", op, a->renormalize);
    TALON__TRY(talon__check_size(op, "tokens", a->tokens, 65536));
    TALON__TRY(talon__check_size(op, "experts", a->experts, 512));
    TALON__TRY(talon__check_size(op, "k", a->k, 16));
    if (a->k > a->experts)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->k = %lld is larger than args->experts = %lld", op,
                           (long long)a->k, (long long)a->experts);
    TALON__TRY(talon__check_ptr_align(op, "topk_weights", a->topk_weights, 0, 4));
    TALON__TRY(talon__check_ptr_align(op, "topk_ids", a->topk_ids, 0, 4));
    TALON__TRY(talon__check_ptr_align(op, "logits", a->logits, 0, esize));
    TALON__TRY(talon__check_ptr_align(op, "correction_bias", a->correction_bias, 1, 4));
    memset(&p, 0, sizeof p);
    TALON__TRY(talon__check_stride(op, "logits_stride", a->logits_stride, a->experts,
                                   &p.logits_stride));
    p.logits = a->logits; p.bias = a->correction_bias;
    p.weights = a->topk_weights; p.ids = a->topk_ids;
    p.tokens = a->tokens; p.experts = (int)a->experts; p.k = (int)a->k;
    p.scoring = (int)a->scoring; p.renormalize = a->renormalize;
    vec = 16 / esize;
    if (a->logits % 16 || a->experts % vec || p.logits_stride % vec) vec = 1;
    per_lane = a->experts <= 128 ? 4 : a->experts <= 256 ? 8 : 16;
    if (per_lane < vec) per_lane = vec;
    body = bodies[a->scoring == TALON_ROUTER_SOFTMAX && !a->correction_bias]
                 [per_lane == 4 ? 0 : per_lane == 8 ? 1 : 2];
    k = talon__pick(body, a->logits_dtype, vec, 32 * TALON__ROUTER_TOKENS_PER_BLOCK);
    return talon__launch(ctx, stream, op, k,
                         (a->tokens + TALON__ROUTER_TOKENS_PER_BLOCK - 1) /
                             TALON__ROUTER_TOKENS_PER_BLOCK,
                         &p);
}

/* ---------------------------------------------------------------- top-k */
static int talon__topk_small(int64_t rows, int64_t cols) {
    return rows * ((cols + 4095) / 4096) <= TALON__TOPK_SMALL;
}

/* Elements per block. Chunk path: 16384, 8192 or 4096, the longest that still makes 512
   blocks (long chunks amortise a block's fixed work, short ones spread a small batch over
   many SMs; one histogram slot per 4096 elements whatever the chunk, within its 16-bit
   counts). Sampled path: c = ceil(cols / 32768) chunks per row when that makes at least 1024
   blocks (2.6 waves of TALON__TOPK_SLOTS); with fewer, the c in 1 .. cols / 4096 (the fewest
   on a tie) with the least
     cost(c) = ceil(rows c / TALON__TOPK_SLOTS) x (ceil(cols / c) + 8192),
   waves of resident blocks times a block's elements plus a fixed cost worth 8192 of them: a
   block streams at a latency-bound rate, so with few waves a last wave of few blocks leaves
   DRAM idle. chunk_len = ceil(cols / c) rounded up to 64 elements, so every chunk starts
   16-byte aligned in an aligned row. kernels/topk.cu has the measurements behind both. */
static int64_t talon__topk_cost(int64_t rows, int64_t cols, int64_t c) {
    return (rows * c + TALON__TOPK_SLOTS - 1) / TALON__TOPK_SLOTS * ((cols + c - 1) / c + 8192);
}
static int64_t talon__topk_chunk_len(int64_t rows, int64_t cols, int small) {
    int64_t chunk_len, c = (cols + 32767) / 32768, i, cost, best;
    if (small) {
        for (chunk_len = 16384; chunk_len > 4096; chunk_len /= 2)
            if (rows * ((cols + chunk_len - 1) / chunk_len) >= 512) break;
        return chunk_len;
    }
    if (rows * c < 1024)
        for (c = 1, best = talon__topk_cost(rows, cols, 1), i = 2; i <= cols / 4096; i++)
            if ((cost = talon__topk_cost(rows, cols, i)) < best) c = i, best = cost;
    return ((cols + c - 1) / c + 63) / 64 * 64;
}

/* 4-byte words of workspace per row: on the chunk path one histogram per chunk of 4096 (two
   16-bit counts a word), then counters, candidate keys and indices, rounded to 16 bytes. */
static int64_t talon__topk_row_ints(int64_t rows, int64_t cols) {
    int64_t cap = cols < TALON__TOPK_CAP ? cols : TALON__TOPK_CAP;
    int64_t hist = talon__topk_small(rows, cols) ? (cols + 4095) / 4096 * (1 << TALON__TOPK_DIGIT) / 2
                                                 : 0;
    return (hist + TALON__TOPK_CTRS + 2 * cap + 3) / 4 * 4;
}

int64_t talon_topk_workspace_size(int64_t rows, int64_t cols) {
    if (rows < 1 || rows > TALON__TOPK_ROWS_MAX || cols < 1 || cols > TALON__TOPK_COLS_MAX)
        return 0;
    return rows * talon__topk_row_ints(rows, cols) * 4;
}

talon_status talon_topk(talon_ctx *ctx, CUstream stream, const talon_topk_args *a) {
    static const char op[] = "talon_topk";
    talon__topk_params p;
    int64_t need, chunk_len;
    int esize, k, small;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_dtype_f32(op, "dtype", a->dtype, &esize));
    TALON__TRY(talon__check_size(op, "rows", a->rows, TALON__TOPK_ROWS_MAX));
    TALON__TRY(talon__check_size(op, "cols", a->cols, TALON__TOPK_COLS_MAX));
    TALON__TRY(talon__check_size(op, "k", a->k, TALON__TOPK_KMAX));
    if (a->k > a->cols)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->k = %lld is larger than args->cols = %lld", op,
                           (long long)a->k, (long long)a->cols);
    memset(&p, 0, sizeof p);
    TALON__TRY(talon__check_stride(op, "in_stride", a->in_stride, a->cols, &p.in_stride));
    if (a->sorted != 0 && a->sorted != 1)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->sorted = %d is not 0 or 1",
                           op, a->sorted);
    TALON__TRY(talon__check_ptr_align(op, "out_values", a->out_values, 0, esize));
    TALON__TRY(talon__check_ptr_align(op, "out_indices", a->out_indices, 0, 4));
    TALON__TRY(talon__check_ptr_align(op, "in", a->in, 0, esize));
    TALON__TRY(talon__check_ptr_align(op, "workspace", a->workspace, 0, 16));
    need = talon_topk_workspace_size(a->rows, a->cols);
    if (a->workspace_bytes < need)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->workspace_bytes = %lld is smaller than the %lld bytes "
                           "talon_topk_workspace_size(%lld, %lld) asks for",
                           op, (long long)a->workspace_bytes, (long long)need,
                           (long long)a->rows, (long long)a->cols);
    p.out_values = a->out_values; p.out_indices = a->out_indices; p.in = a->in;
    p.workspace = a->workspace;
    p.row_ints = need / (a->rows * 4);
    p.cols = (int)a->cols; p.k = (int)a->k; p.sorted = a->sorted;
    p.cap = (int)(a->cols < TALON__TOPK_CAP ? a->cols : TALON__TOPK_CAP);
    small = talon__topk_small(a->rows, a->cols);
    chunk_len = talon__topk_chunk_len(a->rows, a->cols, small);
    p.chunk_len = (int)chunk_len;
    p.chunks = (int)((a->cols + chunk_len - 1) / chunk_len);
    if (small) {
        k = talon__pick(TALON__B_topk_chunk_hist, a->dtype, 1, 512);
        TALON__TRY(talon__launch2d(ctx, stream, op, k, p.chunks, a->rows, &p));
        k = talon__pick(TALON__B_topk_chunk_select, a->dtype, 1, 512);
        return talon__launch2d(ctx, stream, op, k, p.chunks, a->rows, &p);
    }
    k = talon__pick(TALON__B_topk_sample, a->dtype, 1, 512);
    TALON__TRY(talon__launch2d(ctx, stream, op, k, a->rows, 1, &p));
    k = talon__pick(TALON__B_topk_select, a->dtype, 1, 512);
    return talon__launch_ex(ctx, stream, op, k, p.chunks, a->rows, &p, 1);
}

/* ---------------------------------------------------------------- mixture of experts */
/* Shape limits of moe_align_block_size; pre is "args->" for the op, "" for the capacity
   helper, so each message names the argument as the caller spelled it. */
static talon_status talon__moe_align_shape(const char *op, const char *pre, int64_t tokens,
                                           int64_t k, int64_t experts, int64_t block_size) {
    static const struct { const char *name; int64_t max; } lim[3] = {
        {"tokens", 65536}, {"k", 64}, {"experts", TALON__MOE_MAX_EXPERTS}};
    const int64_t v[3] = {tokens, k, experts};
    int i;
    for (i = 0; i < 3; i++)
        if (v[i] < 1 || v[i] > lim[i].max)
            return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                               "%s: %s%s = %lld is out of range [1, %lld]", op, pre, lim[i].name,
                               (long long)v[i], (long long)lim[i].max);
    if (block_size < 1 || block_size > 1024 || (block_size & (block_size - 1)))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: %sblock_size = %lld is not a power of two in [1, 1024]", op, pre,
                           (long long)block_size);
    return TALON_SUCCESS;
}

static void talon__moe_align_worst(int64_t tokens, int64_t k, int64_t experts,
                                   int64_t block_size, int64_t *sorted, int64_t *blocks) {
    const int64_t n = tokens * k;
    *sorted = n + (experts < n ? experts : n) * (block_size - 1);
    *blocks = (*sorted + block_size - 1) / block_size;
}

talon_status talon_moe_align_block_size_capacity(int64_t tokens, int64_t k, int64_t experts,
                                                 int64_t block_size, int64_t *sorted_capacity,
                                                 int64_t *expert_ids_capacity) {
    int64_t sorted, blocks;
    TALON__TRY(talon__moe_align_shape("talon_moe_align_block_size_capacity", "", tokens, k,
                                      experts, block_size));
    talon__moe_align_worst(tokens, k, experts, block_size, &sorted, &blocks);
    if (sorted_capacity) *sorted_capacity = sorted;
    if (expert_ids_capacity) *expert_ids_capacity = blocks;
    return TALON_SUCCESS;
}

talon_status talon_moe_align_block_size(talon_ctx *ctx, CUstream stream,
                                        const talon_moe_align_block_size_args *a) {
    static const char op[] = "talon_moe_align_block_size";
    talon__moe_align_params p;
    int64_t sorted, blocks, n;
    talon__body body;
    int64_t grid;
    int cluster, block;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_ptr_align(op, "sorted_token_ids", a->sorted_token_ids, 0, 4));
    TALON__TRY(talon__check_ptr_align(op, "expert_ids", a->expert_ids, 0, 4));
    TALON__TRY(talon__check_ptr_align(op, "num_tokens_post_padded", a->num_tokens_post_padded,
                                      0, 4));
    TALON__TRY(talon__check_ptr_align(op, "topk_ids", a->topk_ids, 0, 4));
    TALON__TRY(talon__moe_align_shape(op, "args->", a->tokens, a->k, a->experts, a->block_size));
    talon__moe_align_worst(a->tokens, a->k, a->experts, a->block_size, &sorted, &blocks);
    if (a->sorted_capacity < sorted || a->expert_ids_capacity < blocks)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->%s = %lld is below the worst case %lld for tokens = %lld, "
                           "k = %lld, experts = %lld, block_size = %lld "
                           "(talon_moe_align_block_size_capacity)",
                           op, a->sorted_capacity < sorted ? "sorted_capacity" : "expert_ids_capacity",
                           (long long)(a->sorted_capacity < sorted ? a->sorted_capacity
                                                                   : a->expert_ids_capacity),
                           (long long)(a->sorted_capacity < sorted ? sorted : blocks),
                           (long long)a->tokens, (long long)a->k, (long long)a->experts,
                           (long long)a->block_size);
    n = a->tokens * a->k;
    if (n <= TALON__MOE_ALIGN_SMALL_MAX) body = TALON__B_moe_align_small, cluster = 1, block = 512;
    else if (n <= TALON__MOE_ALIGN_C8_MAX) body = TALON__B_moe_align_c8, cluster = 8, block = 512;
    else if (n <= TALON__MOE_ALIGN_C8W_MAX) body = TALON__B_moe_align_c8w, cluster = 8, block = 512;
    else body = TALON__B_moe_align_x8, cluster = 8, block = 1024;
    memset(&p, 0, sizeof p);
    p.sorted = a->sorted_token_ids; p.expert_ids = a->expert_ids;
    p.num_post = a->num_tokens_post_padded; p.topk_ids = a->topk_ids;
    p.sorted_capacity = a->sorted_capacity; p.expert_ids_capacity = a->expert_ids_capacity;
    p.numel = (int)n; p.experts = (int)a->experts; p.block_size = (int)a->block_size;
    p.chunk = (int)((n + block * cluster - 1) / (block * cluster) * 32);
    grid = cluster;
    if (cluster == 1 && a->sorted_capacity > TALON__MOE_ALIGN_SLICE) {
        grid = (a->sorted_capacity + TALON__MOE_ALIGN_SLICE - 1) / TALON__MOE_ALIGN_SLICE;
        if (grid > TALON__MOE_ALIGN_SLICES_MAX) grid = TALON__MOE_ALIGN_SLICES_MAX;
        p.sorted_slice = ((a->sorted_capacity + grid - 1) / grid + 3) & ~(int64_t)3;
        p.expert_ids_slice = (a->expert_ids_capacity + grid - 1) / grid;
        body = TALON__B_moe_align_sliced;
    }
    return talon__launch(ctx, stream, op, talon__pick(body, TALON_DTYPE_I32, 1, block), grid,
                         &p);
}

talon_status talon_moe_sum(talon_ctx *ctx, CUstream stream, const talon_moe_sum_args *a) {
    static const char op[] = "talon_moe_sum";
    talon__moe_sum_params p;
    CUdeviceptr ptrs[2];
    int vec, r, k;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_ptr(op, "out", a->out, 0));
    TALON__TRY(talon__check_ptr(op, "in", a->in, 0));
    TALON__TRY(talon__check_ptr_align(op, "weights", a->weights, 1, 4));
    TALON__TRY(talon__check_size(op, "tokens", a->tokens, TALON__GRID_MAX));
    TALON__TRY(talon__check_size(op, "k", a->k, 64));
    TALON__TRY(talon__check_size(op, "hidden", a->hidden, TALON__GRID_MAX));
    TALON__TRY(talon__check_dtype(op, a->dtype));
    ptrs[0] = a->out; ptrs[1] = a->in;
    vec = talon__vec8(ptrs, 2, &a->hidden, 1) ? 8 : 1;
    /* slices per thread: 8 / k 16-byte loads each, as k = 8 has (moe.cu) */
    r = vec == 8 && a->k <= 2 ? 4 : vec == 8 && a->k <= 4 ? 2 : 1;
    k = talon__pick(r == 4 ? TALON__B_moe_sum_r4 : r == 2 ? TALON__B_moe_sum_r2 : TALON__B_moe_sum,
                    a->dtype, vec, 256);
    memset(&p, 0, sizeof p);
    p.out = a->out; p.in = a->in; p.weights = a->weights; p.hidden = a->hidden;
    p.k = (int)a->k;
    p.chunks = (int)((a->hidden + 256 * vec * r - 1) / (256 * vec * r));
    if (p.chunks > TALON__GRID_MAX / a->tokens)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->tokens = %lld with args->hidden = %lld needs %.0f blocks, "
                           "more than the grid limit %lld",
                           op, (long long)a->tokens, (long long)a->hidden,
                           (double)p.chunks * (double)a->tokens, TALON__GRID_MAX);
    return talon__launch(ctx, stream, op, k, a->tokens * p.chunks, &p);
}

/* ---------------------------------------------------------------- rotary embedding, KV cache */
talon_status talon_rope(talon_ctx *ctx, CUstream stream, const talon_rope_args *a) {
    static const char op[] = "talon_rope";
    const int pos_bytes = a && a->positions_dtype == TALON_INDEX_I64 ? 8 : 4;
    talon__rope_params p;
    int64_t rot, heads, vp, per_token;
    int vec, neox, one, block, k;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_dtype(op, a->dtype));
    if (a->style != TALON_ROPE_NEOX && a->style != TALON_ROPE_GPTJ)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->style = %d is not TALON_ROPE_NEOX (0) or TALON_ROPE_GPTJ (1)",
                           op, (int)a->style);
    if (a->positions_dtype != TALON_INDEX_I32 && a->positions_dtype != TALON_INDEX_I64)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->positions_dtype = %d is not TALON_INDEX_I32 (0) or "
                           "TALON_INDEX_I64 (1)", op, (int)a->positions_dtype);
    TALON__TRY(talon__check_ptr(op, "q", a->q, 0));
    TALON__TRY(talon__check_ptr(op, "k", a->k, 1));
    TALON__TRY(talon__check_ptr_align(op, "positions", a->positions, 0, pos_bytes));
    TALON__TRY(talon__check_ptr_align(op, "cos_sin_cache", a->cos_sin_cache, 1, 4));
    TALON__TRY(talon__check_size(op, "tokens", a->tokens, TALON__GRID_MAX));
    TALON__TRY(talon__check_size(op, "num_q_heads", a->num_q_heads, 1 << 20));
    if (a->k) TALON__TRY(talon__check_size(op, "num_kv_heads", a->num_kv_heads, 1 << 20));
    else if (a->num_kv_heads)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->num_kv_heads = %lld but args->k is NULL (0 rotates q only)",
                           op, (long long)a->num_kv_heads);
    TALON__TRY(talon__check_size(op, "head_dim", a->head_dim, 1024));
    rot = a->rot_dim ? a->rot_dim : a->head_dim;
    if (rot < 2 || rot > a->head_dim || rot % 2)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->rot_dim = %lld must be even and in [2, head_dim = %lld] "
                           "(0: head_dim)", op, (long long)a->rot_dim, (long long)a->head_dim);
    memset(&p, 0, sizeof p);
    TALON__TRY(talon__check_stride(op, "q_stride", a->q_stride, a->num_q_heads * a->head_dim,
                                   &p.q_stride));
    TALON__TRY(talon__check_stride(op, "k_stride", a->k_stride, a->num_kv_heads * a->head_dim,
                                   &p.k_stride));
    if (a->cos_sin_cache) {
        TALON__TRY(talon__check_size(op, "max_pos", a->max_pos, INT64_MAX / 1024));
    } else if (!(a->theta >= 0.0f && a->theta <= 3.4028235e38f)) {
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->theta = %g must be finite and > 0 (0: 10000), or pass "
                           "args->cos_sin_cache", op, (double)a->theta);
    }
    neox = a->style == TALON_ROPE_NEOX;
    {
        const CUdeviceptr ptrs[3] = {a->q, a->k, a->cos_sin_cache};
        const int64_t lens[4] = {a->head_dim, p.q_stride, p.k_stride, neox ? rot / 2 : rot};
        vec = talon__vec8(ptrs, 3, lens, 4) ? 8 : 1;
    }
    vp = vec == 1 ? 1 : neox ? 8 : 4;
    one = neox && vec == 8 && a->cos_sin_cache; /* one head per thread, not TALON__ROPE_HEADS */
    heads = a->num_q_heads + (a->k ? a->num_kv_heads : 0);
    per_token = one ? heads : (heads + TALON__ROPE_HEADS - 1) / TALON__ROPE_HEADS;
    per_token *= rot / 2 / vp;
    if (per_token > TALON__GRID_MAX / a->tokens)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->tokens = %lld with %lld heads and rot_dim %lld needs %.0f "
                           "threads, more than 2^31 - 1", op, (long long)a->tokens,
                           (long long)heads, (long long)rot, (double)per_token * (double)a->tokens);
    p.q = a->q; p.k = a->k; p.positions = a->positions; p.cos_sin = a->cos_sin_cache;
    p.max_pos = a->max_pos;
    p.theta = a->theta > 0.0f ? (double)a->theta : 10000.0;
    p.num_q_heads = (int32_t)a->num_q_heads; p.heads = (int32_t)heads;
    p.head_dim = (int32_t)a->head_dim; p.rot_dim = (int32_t)rot;
    p.vecs = (uint32_t)(rot / 2 / vp); p.per_token = (uint32_t)per_token;
    p.threads = (uint32_t)(per_token * a->tokens);
    p.pos64 = a->positions_dtype == TALON_INDEX_I64;
    block = one ? 128 : 256;
    k = talon__pick(one ? TALON__B_rope_neox1 : neox ? TALON__B_rope_neox : TALON__B_rope_gptj,
                    a->dtype, vec, block);
    return talon__launch(ctx, stream, op, k, ((int64_t)p.threads + block - 1) / block, &p);
}

/* The constants of rope.cu's division x / scale = (x mul) / div for one finite scale > 0:
   mul = 2^k and div = scale 2^k in [2^-22, 4) (in [1, 2) but at the ends of the float range),
   rcp = 1 / div rounded to nearest. Bit operations, and a division in double whose second
   rounding is harmless (53 >= 2 * 24 + 2 bits), so no host floating-point mode (flush to zero,
   reciprocal estimates) can change them. */
static void talon__fp8_quant(float scale, float q[3]) {
    uint32_t b, e;
    int k;
    memcpy(&b, &scale, 4);
    e = b >> 23;
    if (e) { /* normal: div takes scale's significand, exponent 0 (1 for the top binade) */
        k = 127 - (int)e > -126 ? 127 - (int)e : -126;
        b = (b & 0x7fffffu) | (uint32_t)((int)e + k) << 23;
        memcpy(&q[1], &b, 4);
    } else { /* subnormal: scale 2^127, exactly the integer significand times 2^-22 */
        k = 127;
        q[1] = (float)((double)b * 0x1p-22);
    }
    b = (uint32_t)(127 + k) << 23;
    memcpy(&q[0], &b, 4);
    q[2] = (float)(1.0 / (double)q[1]);
}

talon_status talon_kv_append(talon_ctx *ctx, CUstream stream, const talon_kv_append_args *a) {
    static const char op[] = "talon_kv_append";
    const int fp8 = a && a->cache_dtype == TALON_DTYPE_FP8_E4M3, cache_bytes = fp8 ? 1 : 2;
    const char *const scale_names[2] = {"k_scale", "v_scale"};
    talon__kv_params p;
    int64_t row, units, per_block, strides[3];
    int vec, k, i;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_dtype(op, a->dtype));
    if (a->cache_dtype != a->dtype && !fp8)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->cache_dtype = %d is neither args->dtype = %d nor "
                           "TALON_DTYPE_FP8_E4M3 (%d)", op, (int)a->cache_dtype, (int)a->dtype,
                           (int)TALON_DTYPE_FP8_E4M3);
    TALON__TRY(talon__check_ptr_align(op, "k_cache", a->k_cache, 0, cache_bytes));
    TALON__TRY(talon__check_ptr_align(op, "v_cache", a->v_cache, 0, cache_bytes));
    TALON__TRY(talon__check_ptr(op, "k", a->k, 0));
    TALON__TRY(talon__check_ptr(op, "v", a->v, 0));
    TALON__TRY(talon__check_ptr_align(op, "slot_mapping", a->slot_mapping, 0, 8));
    TALON__TRY(talon__check_size(op, "tokens", a->tokens, TALON__GRID_MAX));
    TALON__TRY(talon__check_size(op, "num_kv_heads", a->num_kv_heads, 1 << 20));
    TALON__TRY(talon__check_size(op, "head_dim", a->head_dim, 1024));
    TALON__TRY(talon__check_size(op, "page_size", a->page_size, 1 << 20));
    if (a->page_size & (a->page_size - 1))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->page_size = %lld is not a power of two", op,
                           (long long)a->page_size);
    row = a->num_kv_heads * a->head_dim;
    TALON__TRY(talon__check_size(op, "num_pages", a->num_pages,
                                 INT64_MAX / 2 / a->page_size / row));
    TALON__TRY(talon__kv_strides(op, a->layout, a->page_size, a->num_kv_heads, a->head_dim,
                                 strides));
    memset(&p, 0, sizeof p);
    TALON__TRY(talon__check_stride(op, "k_stride", a->k_stride, row, &p.k_stride));
    TALON__TRY(talon__check_stride(op, "v_stride", a->v_stride, row, &p.v_stride));
    for (i = 0; fp8 && i < 2; i++) {
        const float s = i ? a->v_scale : a->k_scale;
        if (!(s >= 0.0f && s <= 3.4028235e38f))
            return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                               "%s: args->%s = %g must be finite and > 0 (0: 1.0)", op,
                               scale_names[i], (double)s);
        talon__fp8_quant(s ? s : 1.0f, p.quant[i]);
    }
    {
        const CUdeviceptr ptrs[4] = {a->k_cache, a->v_cache, a->k, a->v};
        /* HND (page_size > 1) splits a token's row by head: a unit must not cross one */
        const int64_t lens[4] = {row, p.k_stride, p.v_stride,
                                 strides[2] == a->head_dim ? row : a->head_dim};
        vec = talon__vec8(ptrs, 4, lens, 4) ? 8 : 1;
    }
    units = row / vec * 2;
    per_block = 256 * TALON__KV_UNROLL;
    if (units > (TALON__GRID_MAX - per_block) / a->tokens)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->tokens = %lld with num_kv_heads * head_dim = %lld is more "
                           "than one launch covers (2^31 vectors)", op, (long long)a->tokens,
                           (long long)row);
    p.k_cache = a->k_cache; p.v_cache = a->v_cache; p.k = a->k; p.v = a->v;
    p.slots = a->slot_mapping;
    p.num_slots = a->num_pages * a->page_size;
    p.row = row;
    p.page_rows = strides[0]; p.slot_stride = strides[1]; p.head_stride = strides[2];
    p.head_dim = (uint32_t)a->head_dim;
    p.page_shift = talon__ceil_log2((uint64_t)a->page_size);
    p.row_vecs = (uint32_t)(row / vec);
    p.div_l = talon__ceil_log2(2ull * p.row_vecs);
    p.div_m = (uint32_t)((((1ull << p.div_l) - 2ull * p.row_vecs) << 32) / (2ull * p.row_vecs) + 1);
    p.units = (uint32_t)(units * a->tokens);
    k = talon__pick(fp8 ? TALON__B_kv_append_fp8 : TALON__B_kv_append, a->dtype, vec, 256);
    return talon__launch(ctx, stream, op, k, ((int64_t)p.units + per_block - 1) / per_block, &p);
}

/* ---------------------------------------------------------------- attention (decode) */
#define TALON__DECODE_SMS 132         /* H100 SXM / H200; see talon_decode_attention */
#define TALON__DECODE_MIN_CHUNK 1024  /* keys per split: at B=1, L=32768 (H100), 32 splits of
                                         1024 keys took 58.3 us; 30: 61.3, 33: 60.6, 48: 62.3,
                                         64: 60.4, 128: 65.6, 24: 67.7, 16: 70.6 */
#define TALON__DECODE_HEADS 4         /* query heads per CTA at most */

typedef struct talon__decode_plan {
    int heads_per_cta, head_chunks, gmax, splits;
    int64_t pt_stride, ws_bytes, part_o_bytes;
} talon__decode_plan;

static talon_status talon__check_range(const char *op, const char *name, int64_t v, int64_t lo,
                                       int64_t hi) {
    if (v < lo || v > hi)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->%s = %lld is out of range [%lld, %lld]", op, name,
                           (long long)v, (long long)lo, (long long)hi);
    return TALON_SUCCESS;
}

static talon_status talon__check_float(const char *op, const char *name, float v, int positive,
                                       int zero_ok) {
    if (v - v != 0.0f || (positive && v < 0.0f) || (!zero_ok && v == 0.0f))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->%s = %g must be %s", op,
                           name, (double)v,
                           positive ? (zero_ok ? "finite and >= 0 (0: default)"
                                               : "finite and > 0")
                                    : "finite");
    return TALON_SUCCESS;
}

/* The split count. More than 1.5 CTAs per SM, up to one wave, already keep the memory busy:
   no split, which would only add the merge (H200, L=4096, the automatic choice before this
   rule against one split: D=128 208 CTAs 119.6 -> 111.8 us, 256 CTAs 135.6 -> 130.4, 384
   CTAs 201.0 -> 189.7; D=256 224 CTAs 246.0 -> 224.0, 256 CTAs 258.7 -> 244.2; at 192 CTAs
   2 splits still win, 104.6 against 107.7). Otherwise, with `slots` CTAs resident on the
   GPU, s splits take ceil(ctas * s / slots) waves of CTAs that each do 1/s of the work; the
   smallest s with the best such estimate wins, with splits of at least
   TALON__DECODE_MIN_CHUNK keys. No slack towards fewer splits: at B=1, L=32768 a 10% slack
   picked 30 splits over 32, 5% slower (the merge is cheap). Past one wave the tail matters
   (600 CTAs: 4 splits 311.9 us, one 350.3). When that still leaves at most 1.5 CTAs per SM,
   each CTA walks its keys at its own latency-bound pace, so the chunks shrink (to
   TALON__DECODE_FILL_CHUNK keys at least) until there are 2 CTAs per SM. H200, Hq/Hk 32/8,
   D=128 bf16, without this step against with it: B=1 L=1024 24.4 -> 10.5 us, L=8192
   30.6 -> 19.8 (32 splits), L=16384 32.4 -> 28.8 (32; 64 took 26.8), B=2 L=8192 32.7 ->
   26.9 (16); fp8 B=1 L=2048 21.8 -> 10.8. More than 2 per SM lost at head_dim 256 (16/8,
   B=1 L=8192: 47.9 -> 27.7 at 32 splits, 28.0 at 64; B=2 L=8192: 48.4 -> 41.2 at 16, 44.5
   at 32). */
#define TALON__DECODE_FILL_CHUNK 128
static int talon__decode_splits(int64_t ctas, int64_t max_kv_len) {
    /* 4 resident CTAs per SM: __launch_bounds__(128, 4) and the 32/48 KB K/V rings allow 4
       (d64 rows, of fewer registers, 5; fp8 d256 rows 3) */
    const int64_t slots = TALON__DECODE_SMS * 4;
    int64_t most, s, bs = 1, bw; /* best: bw waves over bs splits */
    if (2 * ctas > 3 * TALON__DECODE_SMS && ctas <= slots) return 1;
    most = (max_kv_len + TALON__DECODE_MIN_CHUNK - 1) / TALON__DECODE_MIN_CHUNK;
    bw = (ctas + slots - 1) / slots;
    if (most > 256) most = 256;
    for (s = 2; s <= most; s++) { /* integer comparisons of waves / splits: no float ties */
        int64_t w = (ctas * s + slots - 1) / slots;
        if (w * bs < bw * s) { bw = w; bs = s; }
    }
    if (2 * ctas * bs <= 3 * TALON__DECODE_SMS) {
        s = (2 * TALON__DECODE_SMS + ctas - 1) / ctas;
        most = (max_kv_len + TALON__DECODE_FILL_CHUNK - 1) / TALON__DECODE_FILL_CHUNK;
        if (s > most) s = most;
        if (s > 256) s = 256;
        if (s > bs) bs = s;
    }
    return (int)bs;
}

/* Validates the shape fields and derives the launch plan; shared by the op and its
   workspace-size function, so both agree. */
static talon_status talon__decode_plan_make(const char *op, const talon_decode_attention_args *a,
                                            talon__decode_plan *pl) {
    int64_t group, pages, ctas, splits;
    TALON__TRY(talon__check_dtype(op, a->dtype));
    if (a->kv_dtype != a->dtype && a->kv_dtype != TALON_DTYPE_FP8_E4M3)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->kv_dtype = %d must equal args->dtype (%d) or be "
                           "TALON_DTYPE_FP8_E4M3 (%d)",
                           op, (int)a->kv_dtype, (int)a->dtype, (int)TALON_DTYPE_FP8_E4M3);
    TALON__TRY(talon__check_range(op, "batch", a->batch, 1, 1 << 24));
    TALON__TRY(talon__check_range(op, "num_qo_heads", a->num_qo_heads, 1, 1024));
    TALON__TRY(talon__check_range(op, "num_kv_heads", a->num_kv_heads, 1, 1024));
    if (a->num_qo_heads % a->num_kv_heads)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->num_qo_heads = %lld is not a multiple of args->num_kv_heads "
                           "= %lld",
                           op, (long long)a->num_qo_heads, (long long)a->num_kv_heads);
    if (a->head_dim != 64 && a->head_dim != 128 && a->head_dim != 256)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->head_dim = %lld is not supported (64, 128, 256)", op,
                           (long long)a->head_dim);
    if (a->page_size < 1 || a->page_size > 256 || (a->page_size & (a->page_size - 1)))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->page_size = %lld is not a power of two in [1, 256]", op,
                           (long long)a->page_size);
    TALON__TRY(talon__check_range(op, "max_kv_len", a->max_kv_len, 1, 1 << 30));
    TALON__TRY(talon__check_range(op, "window", a->window, 0, INT32_MAX));
    TALON__TRY(talon__check_range(op, "num_splits", a->num_splits, 0, 256));
    pages = (a->max_kv_len + a->page_size - 1) / a->page_size;
    if (a->page_table_stride && a->page_table_stride < pages)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->page_table_stride = %lld is shorter than the %lld pages "
                           "of max_kv_len = %lld",
                           op, (long long)a->page_table_stride, (long long)pages,
                           (long long)a->max_kv_len);
    pl->pt_stride = a->page_table_stride ? a->page_table_stride : pages;
    group = a->num_qo_heads / a->num_kv_heads;
    pl->head_chunks = (int)((group + TALON__DECODE_HEADS - 1) / TALON__DECODE_HEADS);
    pl->heads_per_cta = (int)((group + pl->head_chunks - 1) / pl->head_chunks);
    pl->gmax = pl->heads_per_cta == 1 ? 1 : pl->heads_per_cta == 2 ? 2 : 4;
    ctas = a->batch * a->num_kv_heads * pl->head_chunks;
    if (ctas > TALON__GRID_MAX)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->batch = %lld with %lld kv heads needs more than 2^31-1 CTAs",
                           op, (long long)a->batch, (long long)a->num_kv_heads);
    splits = a->num_splits ? a->num_splits : talon__decode_splits(ctas, a->max_kv_len);
    pl->splits = (int)splits;
    pl->part_o_bytes = splits * a->batch * a->num_qo_heads * a->head_dim * 4;
    pl->ws_bytes = splits == 1 ? 0 : (pl->part_o_bytes + splits * a->batch * a->num_qo_heads * 4 + 15) / 16 * 16;
    return TALON_SUCCESS;
}

talon_status talon_decode_attention_workspace_size(talon_ctx *ctx,
                                                   const talon_decode_attention_args *a,
                                                   int64_t *bytes) {
    static const char op[] = "talon_decode_attention_workspace_size";
    talon__decode_plan pl;
    TALON__TRY(talon__check_common(op, ctx, a));
    if (!bytes) return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: bytes is NULL", op);
    TALON__TRY(talon__decode_plan_make(op, a, &pl));
    *bytes = pl.ws_bytes;
    return TALON_SUCCESS;
}

talon_status talon_decode_attention(talon_ctx *ctx, CUstream stream,
                                    const talon_decode_attention_args *a) {
    static const char op[] = "talon_decode_attention";
    static const talon__body bodies[2][3] = {
        {TALON__B_decode_g1, TALON__B_decode_g2, TALON__B_decode_g4},
        {TALON__B_decode_fp8_g1, TALON__B_decode_fp8_g2, TALON__B_decode_fp8_g4}};
    const int fp8 = a && a->kv_dtype == TALON_DTYPE_FP8_E4M3;
    talon__decode_plan pl;
    talon__decode_params p;
    float sm_scale, k_scale = 1.0f, log2e = 1.4426950408889634f;
    int64_t strides[3];
    int k;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_ptr_align(op, "o", a->o, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "lse", a->lse, 1, 4));
    TALON__TRY(talon__check_ptr_align(op, "q", a->q, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "k_cache", a->k_cache, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "v_cache", a->v_cache, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "page_table", a->page_table, 0, 4));
    TALON__TRY(talon__check_ptr_align(op, "kv_lens", a->kv_lens, 0, 4));
    TALON__TRY(talon__decode_plan_make(op, a, &pl));
    TALON__TRY(talon__kv_strides(op, a->layout, a->page_size, a->num_kv_heads,
                                 a->head_dim * (fp8 ? 1 : 2), strides));
    if (a->workspace_size < pl.ws_bytes)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->workspace_size = %lld is smaller than the %lld bytes "
                           "talon_decode_attention_workspace_size asks for (%d splits)",
                           op, (long long)a->workspace_size, (long long)pl.ws_bytes, pl.splits);
    TALON__TRY(talon__check_ptr_align(op, "workspace", a->workspace, pl.ws_bytes == 0, 16));
    TALON__TRY(talon__check_float(op, "sm_scale", a->sm_scale, 0, 1));
    TALON__TRY(talon__check_float(op, "logits_soft_cap", a->logits_soft_cap, 1, 1));
    if (fp8) {
        TALON__TRY(talon__check_float(op, "k_scale", a->k_scale, 1, 0));
        TALON__TRY(talon__check_float(op, "v_scale", a->v_scale, 1, 0));
        k_scale = a->k_scale;
    }
    sm_scale = a->sm_scale != 0.0f ? a->sm_scale
               : a->head_dim == 64 ? 0.125f : a->head_dim == 128 ? 0.08838834764831845f : 0.0625f;
    memset(&p, 0, sizeof p);
    p.o = a->o; p.lse = a->lse; p.q = a->q; p.k = a->k_cache; p.v = a->v_cache;
    p.page_table = a->page_table; p.kv_lens = a->kv_lens;
    if (pl.splits > 1) {
        p.part_o = a->workspace;
        p.part_lse = a->workspace + (CUdeviceptr)pl.part_o_bytes;
    }
    p.page_table_stride = pl.pt_stride;
    p.rows = a->batch * a->num_qo_heads;
    p.num_kv_heads = (int)a->num_kv_heads;
    p.group = (int)(a->num_qo_heads / a->num_kv_heads);
    p.heads_per_cta = pl.heads_per_cta;
    p.head_chunks = pl.head_chunks;
    p.page_shift = (int)talon__ceil_log2((uint64_t)a->page_size);
    p.page_rows = (int)strides[0];
    p.slot_stride = (int)strides[1]; p.head_stride = (int)strides[2];
    p.max_kv_len = (int)a->max_kv_len;
    p.window = (int)a->window;
    p.splits = pl.splits;
    p.q_scale = sm_scale * k_scale *
                (a->logits_soft_cap > 0.0f ? 1.0f / a->logits_soft_cap : log2e);
    p.cap = a->logits_soft_cap * log2e;
    p.v_scale = fp8 ? a->v_scale : 1.0f;
    k = talon__pick(bodies[fp8][pl.gmax == 1 ? 0 : pl.gmax == 2 ? 1 : 2], a->dtype,
                    (int)a->head_dim, 128);
    TALON__TRY(talon__launch2d(ctx, stream, op, k,
                               a->batch * a->num_kv_heads * pl.head_chunks, pl.splits, &p));
    if (pl.splits > 1) {
        talon__merge_params m;
        memset(&m, 0, sizeof m);
        m.o = a->o; m.lse = a->lse; m.v0 = p.part_o; m.s0 = p.part_lse;
        m.v_step = p.rows * a->head_dim * 4;
        m.s_step = p.rows * 4;
        m.rows = p.rows;
        m.head_dim = a->head_dim;
        m.n = pl.splits;
        k = talon__pick(TALON__B_merge_splits, a->dtype, 8, 128);
        return talon__launch_ex(ctx, stream, op, k,
                                (p.rows * a->head_dim / 8 * TALON__DECODE_MERGE_LANES + 127) / 128,
                                1, &m, 1);
    }
    return TALON_SUCCESS;
}

talon_status talon_merge_attention_states(talon_ctx *ctx, CUstream stream,
                                          const talon_merge_attention_states_args *a) {
    static const char op[] = "talon_merge_attention_states";
    talon__merge_params m;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_ptr_align(op, "o", a->o, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "lse", a->lse, 1, 4));
    TALON__TRY(talon__check_ptr_align(op, "o_a", a->o_a, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "lse_a", a->lse_a, 0, 4));
    TALON__TRY(talon__check_ptr_align(op, "o_b", a->o_b, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "lse_b", a->lse_b, 0, 4));
    TALON__TRY(talon__check_dtype(op, a->dtype));
    if (a->head_dim < 8 || a->head_dim > 4096 || a->head_dim % 8)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->head_dim = %lld is not a multiple of 8 in [8, 4096]", op,
                           (long long)a->head_dim);
    TALON__TRY(talon__check_size(op, "rows", a->rows, TALON__GRID_MAX / (4096 / 8)));
    memset(&m, 0, sizeof m);
    m.o = a->o; m.lse = a->lse; m.v0 = a->o_a; m.s0 = a->lse_a;
    /* Two arbitrary tensors are two states spaced by their difference (wraps harmlessly). */
    m.v_step = (int64_t)(a->o_b - a->o_a);
    m.s_step = (int64_t)(a->lse_b - a->lse_a);
    m.rows = a->rows;
    m.head_dim = a->head_dim;
    m.n = 2;
    return talon__launch(ctx, stream, op, talon__pick(TALON__B_merge_states, a->dtype, 8, 128),
                         (a->rows * a->head_dim / 8 + 127) / 128, &m);
}

#ifdef __cplusplus
}
#endif
#endif /* TALON_IMPLEMENTATION */
