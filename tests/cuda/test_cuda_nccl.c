/* test_cuda_nccl.c: the NCCL plumbing of multi-GPU training (dist/dist.h)
 * on one GPU: a one-rank communicator from a fresh unique id passed as hex
 * text, the mean all-reduce of a random gradient-sized buffer (one rank:
 * the buffer must come back bit for bit, poisoned guard floats around it
 * untouched), the same all-reduce captured in a CUDA graph and replayed,
 * no asynchronous error, NVLink multicast off in the environment; the
 * other collectives of the trainer (byte all-gather in place, double and
 * float all-reduces) leave one rank's data as it is. Skipped
 * without a GPU or without NCCL in the build. */
#include "core/error.h"
#include "cuda/cuda_test.h"
#include "dist/dist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef ST_HAVE_CUDA
enum { GUARD = 64 };

static void one_rank(size_t n) {
    char hex[ST_DIST_ID_HEX];
    int rc = st_dist_new_id(hex);
    CHECK(rc == ST_OK, "unique id: %s", st_last_error());
    st_dist d;
    if (rc == ST_OK) rc = st_dist_init(&d, 0, 1, hex);
    CHECK(rc == ST_OK, "one-rank communicator: %s", st_last_error());
    if (rc != ST_OK) return;
    const char *nvls = getenv("NCCL_NVLS_ENABLE");
    CHECK(nvls && strcmp(nvls, "0") == 0, "NCCL_NVLS_ENABLE is '%s', not 0", nvls ? nvls : "(unset)");
    size_t total = n + 2 * GUARD;
    float *h = malloc(sizeof(float) * total), *back = malloc(sizeof(float) * total);
    st_gc_randnf(h, (long)total, 1.0f, 77, (uint32_t)n);
    for (int i = 0; i < GUARD; i++) h[i] = h[total - 1 - i] = 1234.5f; /* guards */
    float *dev = dev_upload(h, total);
    cudaStream_t s = NULL;
    CHECK(dev && cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "device buffer or stream");
    rc = st_dist_allreduce_mean(&d, dev + GUARD, n, s);
    CHECK(rc == ST_OK, "all-reduce: %s", st_last_error());
    cudaStreamSynchronize(s);
    cudaMemcpy(back, dev, sizeof(float) * total, cudaMemcpyDeviceToHost);
    CHECK(memcmp(h, back, sizeof(float) * total) == 0, "%zu floats: the one-rank mean is not the buffer itself", n);
    /* captured in a graph, replayed twice */
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    int cap = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess;
    int in = cap && st_dist_allreduce_mean(&d, dev + GUARD, n, s) == ST_OK;
    cap = cudaStreamEndCapture(s, &g) == cudaSuccess && cap && in;
    cap = cap && cudaGraphInstantiate(&ge, g, 0) == cudaSuccess;
    CHECK(cap, "the all-reduce in a CUDA graph: %s / %s", st_last_error(), cudaGetErrorString(cudaGetLastError()));
    for (int i = 0; cap && i < 2; i++) cap = cudaGraphLaunch(ge, s) == cudaSuccess;
    cudaStreamSynchronize(s);
    cudaMemcpy(back, dev, sizeof(float) * total, cudaMemcpyDeviceToHost);
    CHECK(cap && memcmp(h, back, sizeof(float) * total) == 0, "%zu floats: the replayed all-reduce changed them", n);
    CHECK(st_dist_poll(&d) == ST_OK, "asynchronous error: %s", st_last_error());
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
    cudaStreamDestroy(s);
    dev_free(dev);
    free(h), free(back);
    st_dist_free(&d);
    printf("  one rank, %zu floats: all-reduce direct and in a graph, guards intact\n", n);
}

/* The trainer's other collectives on one rank: an in-place all-gather of
 * bytes, and double all-reduces (mean, max) leave the data as it is. */
static void one_rank_others(void) {
    char hex[ST_DIST_ID_HEX];
    st_dist d;
    int rc = st_dist_new_id(hex);
    if (rc == ST_OK) rc = st_dist_init(&d, 0, 1, hex);
    CHECK(rc == ST_OK, "one-rank communicator: %s", st_last_error());
    if (rc != ST_OK) return;
    enum { N = 4099 };
    double h[N], back[N];
    for (int i = 0; i < N; i++) h[i] = sin(0.37 * i) * 1e3 + i;
    void *dev = dev_bytes(h, sizeof h);
    cudaStream_t s = NULL;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    int ok = st_dist_allgather(&d, dev, 3 * N + 1, s) == ST_OK; /* odd byte count */
    ok = ok && st_dist_allreduce(&d, dev, N, ST_DIST_F64, ST_DIST_MEAN, s) == ST_OK;
    ok = ok && st_dist_allreduce(&d, dev, N, ST_DIST_F64, ST_DIST_MAX, s) == ST_OK;
    ok = ok && st_dist_allreduce(&d, dev, 2 * N, ST_DIST_F32, ST_DIST_SUM, s) == ST_OK;
    CHECK(ok, "collectives: %s", st_last_error());
    cudaStreamSynchronize(s);
    cudaMemcpy(back, dev, sizeof back, cudaMemcpyDeviceToHost);
    CHECK(memcmp(h, back, sizeof h) == 0, "one rank: all-gather or all-reduces changed the data");
    cudaStreamDestroy(s);
    dev_free(dev);
    st_dist_free(&d);
    printf("  one rank: all-gather of %d bytes, double mean / max and float sum all-reduces: data intact\n", 3 * N + 1);
}
#endif

int main(void) {
    CUDA_TEST_BEGIN();
#ifdef ST_HAVE_CUDA
    if (!st_dist_available()) {
        printf("skipped: %s\n", st_dist_describe());
        return ST_TEST_SKIP;
    }
    printf("%s\n", st_dist_describe());
    one_rank(1);
    one_rank(551100); /* the default preset's parameters */
    one_rank(1000003);
    one_rank_others();
#endif
    TEST_MAIN_END();
}
