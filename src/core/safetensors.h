/* safetensors.h: reading and writing the safetensors format.
 *
 * Layout: u64 little-endian header length n, n bytes of JSON (padded with
 * spaces to a multiple of 8), then the raw little-endian tensor bytes.
 * Header: {"__metadata__": {str: str}, "<name>": {"dtype": "F32", "shape":
 * [...], "data_offsets": [begin, end]}, ...}. Loadable by any safetensors
 * reader. Writes are atomic: a temp file beside the target, fsync, rename,
 * so a crash never leaves a half-written checkpoint under the real name. */
#ifndef ST_SAFETENSORS_H
#define ST_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

typedef enum { ST_DT_F32, ST_DT_F64, ST_DT_I32, ST_DT_I64, ST_DT_U8 } st_dtype;

typedef struct {
    const char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[4];
    const void *data; /* contiguous, row-major */
} st_st_tensor;

typedef struct {
    const char *key, *value;
} st_st_meta;

/* Writes tensors and metadata to path atomically. */
int st_safetensors_write(const char *path, const st_st_tensor *t, int n, const st_st_meta *meta, int n_meta);

/* A file read whole into memory. */
typedef struct {
    char *path;
    unsigned char *blob; /* the whole file */
    size_t size;
    size_t data_start;   /* offset of the tensor bytes */
    void *json;          /* cJSON * of the header */
} st_safetensors;

int st_safetensors_open(const char *path, st_safetensors *f);
void st_safetensors_close(st_safetensors *f);
/* Metadata value of key, or NULL. */
const char *st_safetensors_meta(const st_safetensors *f, const char *key);
/* The tensor `name`: its bytes, dtype and shape. ST_ERR_INPUT when absent or malformed. */
int st_safetensors_find(const st_safetensors *f, const char *name, st_dtype *dtype, int *ndim, int64_t shape[4],
                        const void **data, size_t *bytes);
/* Copies tensor `name` into out, checking dtype and shape (ndim entries of shape). */
int st_safetensors_read(const st_safetensors *f, const char *name, st_dtype dtype, int ndim, const int64_t *shape,
                        void *out);
size_t st_dtype_size(st_dtype t);

#endif
