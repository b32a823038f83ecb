/* A reader for safetensors files (https://huggingface.co/docs/safetensors): an 8-byte
   little-endian header length N, N bytes of JSON header, then the data. Files are mapped
   read-only (mmap), never read into memory; st_data points into the mapping.

   Everything in a header is checked before a tensor is handed out: N in [1, 100 MB] and within
   the file; the header an object whose members (but "__metadata__", an object of strings,
   skipped) are exactly {"dtype", "shape", "data_offsets"}; a known dtype; rank <= 8 and
   non-negative integer dims; begin <= end <= the data size; end - begin == the element count
   times the element size (overflow-checked); no two tensors sharing a byte; tensor names
   unique across the model and free of NUL bytes. Errors name the file, the tensor and the
   value; nothing is printed, nothing aborts, whatever the bytes.

   Tensors are listed sorted by name (strcmp order). Pointers from st_data may be unaligned if
   the file's writer did not align offsets (the safetensors library aligns them).
   C99 + POSIX, also compiles as C++17. */
#ifndef TALON_EXAMPLES_SAFETENSORS_H
#define TALON_EXAMPLES_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000) /* bytes */

typedef enum st_dtype {
    ST_BOOL,
    ST_U8,
    ST_I8,
    ST_I16,
    ST_I32,
    ST_I64,
    ST_F16,
    ST_BF16,
    ST_F32,
    ST_F64,
    ST_F8_E4M3,
    ST_F8_E5M2
} st_dtype;
const char *st_dtype_name(st_dtype d); /* "BF16", ...; "?" for a value outside the enum */
size_t st_dtype_size(st_dtype d);      /* bytes per element; 0 outside the enum */

typedef struct st_tensor {
    const char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t begin, end; /* byte offsets into the data section */
    int file;            /* index of the shard in st_model */
} st_tensor;
typedef struct st_model st_model; /* opaque */

/* Opens a model: `path` is a .safetensors file, a sharded index (a file whose name ends in
   ".json"), or a directory holding model.safetensors (preferred) or
   model.safetensors.index.json. An index is {"metadata": ..., "weight_map": {tensor name:
   shard file name}}: every shard named is opened from the index's directory (names must not
   contain '/' or be "." or ".."), and each tensor named must be in the shard it names. Tensors
   of a shard that the weight_map does not name are listed too. NULL with a message on
   failure. */
st_model *st_open(const char *path, char *err, size_t err_len);
void st_close(st_model *m); /* NULL is fine; unmaps every shard */
int st_count(const st_model *m);
const st_tensor *st_tensor_at(const st_model *m, int i);       /* NULL when i is out of range */
const st_tensor *st_find(const st_model *m, const char *name); /* NULL if absent (binary search) */
const void *st_data(const st_model *m, const st_tensor *t);    /* pointer into the mapping */
int st_file_count(const st_model *m);                          /* shards (1 for one file) */
const char *st_file_path(const st_model *m, int file);         /* a shard's path, as opened */

/* Convenience: finds `name`, checks dtype and shape (ndim and every dim; shape has ndim
   entries), returns the data pointer, or NULL with a message such as
   "model.layers.0.self_attn.q_proj.weight: shape [4096, 4096], expected [2048, 4096]",
   "...: dtype F16, expected BF16" or "...: not in the model". */
const void *st_expect(const st_model *m, const char *name, st_dtype dtype, int ndim,
                      const int64_t *shape, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif

#endif
