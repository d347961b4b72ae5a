/* dist.h: the ranks of data-parallel training and their collectives,
 * through NCCL (DESIGN section 11, issue 8): one process per GPU; rank 0
 * makes a unique id that every rank is given (here as hex text, so that a
 * launcher can pass it in an environment variable), each rank joins the
 * communicator with it, and gradients are averaged over the ranks with one
 * all-reduce of their flat buffer.
 *
 * NCCL's NVLink multicast stays off: st_dist_init sets NCCL_NVLS_ENABLE=0
 * in the process before NCCL reads it (a program using multicast can put a
 * shared host's GPUs out of service).
 *
 * Built with NCCL when CMake finds it beside the CUDA toolkit (ST_HAVE_NCCL);
 * otherwise every call that needs it fails with a message saying so. The
 * id's hex form is plain C and always built. Functions return ST_OK or an
 * error of core/error.h and do not synchronise their stream. */
#ifndef ST_DIST_H
#define ST_DIST_H

#include <stddef.h>

#define ST_DIST_ID_BYTES 128                    /* NCCL_UNIQUE_ID_BYTES */
#define ST_DIST_ID_HEX (2 * ST_DIST_ID_BYTES + 1) /* its hex text with the NUL */

typedef enum { ST_DIST_F32 = 0, ST_DIST_F64 = 1 } st_dist_type;
typedef enum { ST_DIST_SUM = 0, ST_DIST_MEAN = 1, ST_DIST_MAX = 2 } st_dist_op;

struct st_dist;

/* The collectives a trainer uses, as a table: NCCL's (ops NULL in st_dist)
 * or a test double's (tests/cuda/dist_threads.h runs several ranks as
 * threads of one process on one GPU, where NCCL refuses two ranks). Each
 * is enqueued on stream and returns ST_OK or an error of core/error.h. */
typedef struct {
    /* buf[0..n) of every rank reduced by op, the result on every rank (in place) */
    int (*allreduce)(struct st_dist *d, void *buf, size_t n, st_dist_type type, st_dist_op op, void *stream);
    /* buf holds world * bytes; this rank's bytes at buf + rank * bytes go to that place on every rank */
    int (*allgather)(struct st_dist *d, void *buf, size_t bytes, void *stream);
} st_dist_ops;

typedef struct st_dist {
    int rank, world;
    void *comm;             /* ncclComm_t; NULL before st_dist_init */
    const st_dist_ops *ops; /* NULL: NCCL */
    void *ctx;              /* the ops' state */
} st_dist;

/* 1 when this build has NCCL. */
int st_dist_available(void);
/* NCCL's version as text ("2.27.3"), or why there is none. */
const char *st_dist_describe(void);

/* The id's bytes as 256 lowercase hex digits, and back: from_hex names
 * what is wrong with text that is not exactly 256 hex digits. */
void st_dist_id_to_hex(const unsigned char id[ST_DIST_ID_BYTES], char hex[ST_DIST_ID_HEX]);
int st_dist_id_from_hex(const char *hex, unsigned char id[ST_DIST_ID_BYTES]);

/* A new unique id (ncclGetUniqueId, on rank 0 or the launcher), as hex. */
int st_dist_new_id(char hex[ST_DIST_ID_HEX]);

/* Joins rank `rank` of `world` (0 <= rank < world) to the communicator of
 * id hex, on the current CUDA device. Blocks until every rank has joined. */
int st_dist_init(st_dist *d, int rank, int world, const char *hex);

/* buf[0..n) = the mean over the ranks of every rank's buf (ncclAvg, in
 * place), enqueued on stream (a cudaStream_t; capturable in a CUDA graph). */
int st_dist_allreduce_mean(st_dist *d, float *buf, size_t n, void *stream);

/* The table's collectives (NCCL's unless d->ops is set). An all-gather in
 * place: buf holds world * bytes, rank r's part at buf + r * bytes. */
int st_dist_allreduce(st_dist *d, void *buf, size_t n, st_dist_type type, st_dist_op op, void *stream);
int st_dist_allgather(st_dist *d, void *buf, size_t bytes, void *stream);

/* ST_OK while the communicator is healthy; ST_ERR_DEVICE naming this rank
 * and NCCL's reason once an asynchronous error (a dead peer, a network
 * failure) has been seen: the caller then stops and calls st_dist_abort. */
int st_dist_poll(st_dist *d);

/* Tears the communicator down without waiting for the other ranks (after an
 * error), or in order once every rank is done (st_dist_free). */
void st_dist_abort(st_dist *d);
void st_dist_free(st_dist *d);

#endif
