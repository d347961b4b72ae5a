/* bench_ceilings.c: the card's ceilings measured in the same run as the model
 * (cli/bench.h): device-to-device copy, cuBLAS GEMMs in fp32, bf16 and fp32
 * on the bf16 tensor cores. */
#include "cli/bench.h"

#ifdef ST_HAVE_CUDA
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench_gpu.h"
#include "core/error.h"
#include "core/philox.h"
#include "cuda/linear_cuda.h"

/* ======================================================================= */
/* ceilings                                                                */

typedef struct {
    cublasHandle_t h;
    int n, kind; /* 0 sgemm, 1 bf16 in/out, 2 fp32 in/out on bf16 tensor cores */
    float *A, *B, *C;
    uint16_t *A16, *B16, *C16;
    void *src, *dst;
    size_t copy_bytes;
} ceil_ctx;

static int run_copy(void *ctx, int i, cudaStream_t s) {
    (void)i;
    ceil_ctx *c = ctx;
    return CUS(cudaMemcpyAsync(c->dst, c->src, c->copy_bytes, cudaMemcpyDeviceToDevice, s));
}

static int run_gemm(void *ctx, int i, cudaStream_t s) {
    (void)i, (void)s; /* the handle is bound to s */
    ceil_ctx *c = ctx;
    const float one = 1.0f, zero = 0.0f;
    int n = c->n;
    if (c->kind == 0)
        return BLAS(cublasSgemm(c->h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, c->A, n, c->B, n, &zero, c->C, n));
    if (c->kind == 1)
        return BLAS(cublasGemmEx(c->h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, c->A16, CUDA_R_16BF, n, c->B16,
                                 CUDA_R_16BF, n, &zero, c->C16, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
    return BLAS(cublasGemmEx(c->h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, c->A, CUDA_R_32F, n, c->B, CUDA_R_32F, n,
                             &zero, c->C, CUDA_R_32F, n, CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT));
}

static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7FFFu + ((u >> 16) & 1u); /* round to nearest even (finite inputs) */
    return (uint16_t)(u >> 16);
}

/* Host matrices of n*n uniform values in [-1, 1): a random block of 2^22
 * values tiled with an offset per matrix (fresh Philox values, never zeros). */
static int gemm_inputs(ceil_ctx *c, st_bench_pool *pl, uint64_t seed) {
    size_t nn = (size_t)c->n * c->n, R = (size_t)1 << 22;
    float *blk = malloc(sizeof(float) * R), *h = malloc(sizeof(float) * nn);
    uint16_t *h16 = malloc(sizeof(uint16_t) * nn);
    int rc = blk && h && h16 ? ST_OK : ST_FAIL(ST_ERR_MEMORY, "out of host memory for the GEMM inputs");
    if (rc == ST_OK) {
        st_rng r = st_rng_make(seed, ST_STREAM_TEST);
        for (size_t i = 0; i < R; i += 4) {
            st_philox4 d = st_rng_next4(&r);
            for (int k = 0; k < 4; k++)
                blk[i + k] = 2.0f * st_u01f(d.v[k]) - 1.0f;
        }
    }
    if (rc == ST_OK) rc = PALLOC(pl, c->A, nn);
    if (rc == ST_OK) rc = PALLOC(pl, c->B, nn);
    if (rc == ST_OK) rc = PALLOC(pl, c->C, nn);
    if (rc == ST_OK) rc = PALLOC(pl, c->A16, nn);
    if (rc == ST_OK) rc = PALLOC(pl, c->B16, nn);
    if (rc == ST_OK) rc = PALLOC(pl, c->C16, nn);
    for (int m = 0; m < 2 && rc == ST_OK; m++) {
        size_t off = m * 1234567u;
        for (size_t i = 0; i < nn; i++)
            h[i] = blk[(i + off) % R];
        for (size_t i = 0; i < nn; i++)
            h16[i] = to_bf16(h[i]);
        rc = st_bench_upload(m ? c->B : c->A, h, sizeof(float) * nn);
        if (rc == ST_OK) rc = st_bench_upload(m ? c->B16 : c->A16, h16, sizeof(uint16_t) * nn);
    }
    free(blk);
    free(h);
    free(h16);
    return rc;
}

int st_bench_ceilings(const st_bench_opts *o, cJSON *out) {
    cJSON *obj = cJSON_AddObjectToObject(out, "ceilings");
    printf("\n== ceilings: medians of %d runs after %d warm-up runs, CUDA events\n", o->repeats, o->warmup);
    fflush(stdout);
    cudaStream_t s = NULL;
    st_bench_pool pl;
    memset(&pl, 0, sizeof pl);
    ceil_ctx c;
    memset(&c, 0, sizeof c);
    int failed = 0;
    int rc = CUS(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    /* copy */
    c.copy_bytes = (size_t)o->copy_mib << 20;
    st_bench_times t;
    st_bench_pool cpl;
    memset(&cpl, 0, sizeof cpl);
    if (rc == ST_OK) rc = st_bench_pool_alloc(&cpl, &c.src, c.copy_bytes);
    if (rc == ST_OK) rc = st_bench_pool_alloc(&cpl, &c.dst, c.copy_bytes);
    if (rc == ST_OK) rc = CUS(cudaMemsetAsync(c.src, 0x3C, c.copy_bytes, s));
    if (rc == ST_OK) rc = st_bench_time_launches(run_copy, &c, o->warmup, o->repeats, s, &t);
    cJSON *cp = cJSON_AddObjectToObject(obj, "copy");
    cJSON_AddNumberToObject(cp, "bytes", (double)c.copy_bytes);
    if (rc == ST_OK) {
        double gbs = 2.0 * (double)c.copy_bytes / (t.median * 1e-3) / 1e9;
        st_bench_add_times(cp, &t);
        cJSON_AddNumberToObject(cp, "GBps", gbs);
        printf("  %-52s %9.1f GB/s   (median %.3f ms)\n", "device-to-device copy, bytes read + written", gbs, t.median);
    } else {
        st_bench_record_error(cp, "copy");
        failed++;
    }
    st_bench_pool_free(&cpl);
    c.src = c.dst = NULL;
    rc = ST_OK;

    /* GEMMs */
    c.n = o->gemm_size;
    rc = BLAS(cublasCreate(&c.h));
    if (rc == ST_OK) rc = BLAS(cublasSetStream(c.h, s));
    if (rc == ST_OK) rc = BLAS(cublasSetMathMode(c.h, CUBLAS_DEFAULT_MATH));
    if (rc == ST_OK) rc = gemm_inputs(&c, &pl, o->seed);
    if (rc == ST_OK) rc = st_bench_settle();
    const char *names[3] = {"sgemm", "gemm_bf16", "gemm_fp32_fast_bf16"};
    const char *what[3] = {"sgemm fp32 (no TF32)", "gemm bf16 in/out, fp32 accumulate",
                           "gemm fp32 in/out, bf16 tensor cores (32F_FAST_16BF)"};
    double flops = 2.0 * (double)c.n * c.n * c.n;
    for (int k = 0; k < 3; k++) {
        cJSON *g = cJSON_AddObjectToObject(obj, names[k]);
        cJSON_AddNumberToObject(g, "size", c.n);
        int r = rc;
        c.kind = k;
        if (r == ST_OK) r = st_bench_time_launches(run_gemm, &c, o->warmup, o->repeats, s, &t);
        if (r == ST_OK) {
            double tf = flops / (t.median * 1e-3) / 1e12;
            st_bench_add_times(g, &t);
            cJSON_AddNumberToObject(g, "TFLOPs", tf);
            char label[96];
            snprintf(label, sizeof label, "%s, %d^3", what[k], c.n);
            printf("  %-52s %9.1f TFLOP/s (median %.3f ms)\n", label, tf, t.median);
        } else {
            st_bench_record_error(g, names[k]);
            failed++;
        }
        fflush(stdout);
    }
    if (c.h) cublasDestroy(c.h);
    st_bench_pool_free(&pl);
    if (s) cudaStreamDestroy(s);
    return failed;
}

#endif
