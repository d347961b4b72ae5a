/* dist_nccl.c: the ranks' communicator and collectives through NCCL
 * (dist.h). Without NCCL in the build every call says so. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "dist/dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#ifdef ST_HAVE_NCCL
#include <nccl.h>

_Static_assert(sizeof(ncclUniqueId) == ST_DIST_ID_BYTES, "ST_DIST_ID_BYTES is NCCL_UNIQUE_ID_BYTES");

#define ST_NCCL_TRY(call, what)                                                                                 \
    do {                                                                                                        \
        ncclResult_t st_nccl_rc_ = (call);                                                                      \
        if (st_nccl_rc_ != ncclSuccess)                                                                         \
            return ST_FAIL(ST_ERR_DEVICE, "NCCL %s: %s", what, ncclGetErrorString(st_nccl_rc_));                 \
    } while (0)

int st_dist_available(void) { return 1; }

const char *st_dist_describe(void) {
    static char text[32];
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) return "NCCL (version unknown)";
    snprintf(text, sizeof text, "NCCL %d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    return text;
}

int st_dist_new_id(char hex[ST_DIST_ID_HEX]) {
    setenv("NCCL_NVLS_ENABLE", "0", 1); /* before NCCL reads its environment */
    ncclUniqueId id;
    ST_NCCL_TRY(ncclGetUniqueId(&id), "unique id");
    st_dist_id_to_hex((const unsigned char *)id.internal, hex);
    return ST_OK;
}

int st_dist_init(st_dist *d, int rank, int world, const char *hex) {
    memset(d, 0, sizeof *d);
    ST_REQUIRE(world >= 1 && rank >= 0 && rank < world, ST_ERR_INPUT, "rank %d of %d ranks: out of range", rank,
               world);
    ncclUniqueId id;
    ST_TRY(st_dist_id_from_hex(hex, (unsigned char *)id.internal));
    /* NVLink multicast off, whatever the environment says (dist.h) */
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclCommInitRank(&comm, world, id, rank);
    if (r != ncclSuccess)
        return ST_FAIL(ST_ERR_DEVICE, "NCCL: rank %d of %d could not join: %s", rank, world, ncclGetErrorString(r));
    d->rank = rank, d->world = world, d->comm = comm;
    return ST_OK;
}

int st_dist_allreduce_mean(st_dist *d, float *buf, size_t n, void *stream) {
    return st_dist_allreduce(d, buf, n, ST_DIST_F32, ST_DIST_MEAN, stream);
}

int st_dist_allreduce(st_dist *d, void *buf, size_t n, st_dist_type type, st_dist_op op, void *stream) {
    if (d && d->ops) return d->ops->allreduce(d, buf, n, type, op, stream);
    ST_REQUIRE(d && d->comm, ST_ERR_INTERNAL, "NCCL all-reduce before st_dist_init");
    if (n == 0) return ST_OK;
    ncclRedOp_t ro = op == ST_DIST_SUM ? ncclSum : op == ST_DIST_MEAN ? ncclAvg : ncclMax;
    ST_NCCL_TRY(ncclAllReduce(buf, buf, n, type == ST_DIST_F64 ? ncclFloat64 : ncclFloat32, ro,
                              (ncclComm_t)d->comm, (cudaStream_t)stream),
                "all-reduce");
    return ST_OK;
}

int st_dist_allgather(st_dist *d, void *buf, size_t bytes, void *stream) {
    if (d && d->ops) return d->ops->allgather(d, buf, bytes, stream);
    ST_REQUIRE(d && d->comm, ST_ERR_INTERNAL, "NCCL all-gather before st_dist_init");
    if (bytes == 0) return ST_OK;
    char *mine = (char *)buf + (size_t)d->rank * bytes; /* in place */
    ST_NCCL_TRY(ncclAllGather(mine, buf, bytes, ncclUint8, (ncclComm_t)d->comm, (cudaStream_t)stream), "all-gather");
    return ST_OK;
}

int st_dist_poll(st_dist *d) {
    if (!d || !d->comm) return ST_OK;
    ncclResult_t async = ncclSuccess;
    ST_NCCL_TRY(ncclCommGetAsyncError((ncclComm_t)d->comm, &async), "error query");
    if (async == ncclSuccess || async == ncclInProgress) return ST_OK;
    const char *why = ncclGetLastError((ncclComm_t)d->comm);
    return ST_FAIL(ST_ERR_DEVICE, "NCCL: rank %d of %d: %s%s%s", d->rank, d->world, ncclGetErrorString(async),
                   why && why[0] ? ": " : "", why ? why : "");
}

void st_dist_abort(st_dist *d) {
    if (d && d->comm) ncclCommAbort((ncclComm_t)d->comm);
    if (d) d->comm = NULL;
}

void st_dist_free(st_dist *d) {
    if (d && d->comm) ncclCommDestroy((ncclComm_t)d->comm);
    if (d) d->comm = NULL;
}

#else /* no NCCL in this build */

static int no_nccl(void) {
    return ST_FAIL(ST_ERR_DEVICE, "this build has no NCCL (multi-GPU training needs the CUDA backend and NCCL: "
                                  "CMake looks for nccl.h and libnccl beside the CUDA toolkit)");
}

int st_dist_available(void) { return 0; }
const char *st_dist_describe(void) { return "no NCCL in this build"; }
int st_dist_new_id(char hex[ST_DIST_ID_HEX]) {
    hex[0] = 0;
    return no_nccl();
}
int st_dist_init(st_dist *d, int rank, int world, const char *hex) {
    (void)rank, (void)world, (void)hex;
    memset(d, 0, sizeof *d);
    return no_nccl();
}
int st_dist_allreduce(st_dist *d, void *buf, size_t n, st_dist_type type, st_dist_op op, void *stream) {
    if (d && d->ops) return d->ops->allreduce(d, buf, n, type, op, stream);
    return no_nccl();
}
int st_dist_allgather(st_dist *d, void *buf, size_t bytes, void *stream) {
    if (d && d->ops) return d->ops->allgather(d, buf, bytes, stream);
    return no_nccl();
}
int st_dist_allreduce_mean(st_dist *d, float *buf, size_t n, void *stream) {
    return st_dist_allreduce(d, buf, n, ST_DIST_F32, ST_DIST_MEAN, stream);
}
int st_dist_poll(st_dist *d) {
    (void)d;
    return ST_OK;
}
void st_dist_abort(st_dist *d) { (void)d; }
void st_dist_free(st_dist *d) { (void)d; }

#endif
