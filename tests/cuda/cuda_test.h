/* cuda_test.h: what every GPU parity test shares.
 *
 * CUDA_TEST_BEGIN skips the test (exit 77, "skipped: ...") where there is
 * no device, so CI (nvcc, no GPU) compiles and skips it. Buffers go to the
 * device from host arrays; outputs are poisoned with NaN before each run so
 * an element a kernel forgets to write is caught; results are compared as
 * norm(gpu - ref) / norm(ref) (DESIGN/issue 6 bounds: fp32 forward 1e-5,
 * gradients 1e-4) and must be free of NaN. */
#ifndef ST_CUDA_TEST_H
#define ST_CUDA_TEST_H

#include "check/gradcheck.h"
#include "core/device.h"
#include "test.h"

#ifdef ST_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <stdint.h>

/* stdout line-buffered: a run killed by a timeout (the sanitizer runs)
 * still shows how far it got. */
#define CUDA_TEST_BEGIN()                                                                                       \
    do {                                                                                                        \
        setvbuf(stdout, NULL, _IOLBF, 0);                                                                       \
        if (st_cuda_devices() == 0) {                                                                           \
            printf("skipped: %s\n", st_cuda_describe());                                                        \
            return ST_TEST_SKIP;                                                                                \
        }                                                                                                       \
        printf("device: %s\n", st_cuda_describe());                                                             \
    } while (0)

/* A device copy of n floats of host (NULL: uninitialised). */
static inline float *dev_upload(const float *host, size_t n) {
    float *d = NULL;
    if (cudaMalloc((void **)&d, sizeof(float) * (n ? n : 1)) != cudaSuccess) return NULL;
    if (host) cudaMemcpy(d, host, sizeof(float) * n, cudaMemcpyHostToDevice);
    return d;
}
/* n floats of NaN on the device (poisoned outputs). */
static inline float *dev_poisoned(size_t n) {
    float *d = dev_upload(NULL, n);
    if (d) cudaMemset(d, 0xFF, sizeof(float) * (n ? n : 1)); /* 0xFFFFFFFF is a NaN */
    return d;
}
static inline void dev_download(float *host, const float *dev, size_t n) {
    cudaDeviceSynchronize();
    cudaMemcpy(host, dev, sizeof(float) * n, cudaMemcpyDeviceToHost);
}
static inline void dev_free(void *d) { cudaFree(d); }
/* bytes of device memory, a copy of host when it is not NULL. */
static inline void *dev_bytes(const void *host, size_t bytes) {
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) return NULL;
    if (host) cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice);
    return d;
}
/* n standard normals times scale (Philox test stream, salt), one spare element. */
static inline float *host_randn_scaled(size_t n, float scale, uint64_t seed, uint32_t salt) {
    float *p = malloc(sizeof(float) * (n + 1));
    if (p) st_gc_randnf(p, (long)n, scale, seed, salt);
    return p;
}
/* A new host array holding n floats of device memory. */
static inline float *dev_download_new(const float *d, size_t n) {
    float *h = malloc(sizeof(float) * (n + 1));
    dev_download(h, d, n);
    return h;
}

/* The bits dev_poisoned writes: a NaN an output must never keep. */
#define POISON_BITS 0xFFFFFFFFu
static inline float poison(void) {
    uint32_t u = POISON_BITS;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline int is_poison(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u == POISON_BITS;
}
static inline float *host_poisoned(size_t n) {
    float *p = malloc(sizeof(float) * (n + 1));
    for (size_t i = 0; i < n; i++) p[i] = poison();
    return p;
}
static inline float *host_copy(const float *src, size_t n) {
    float *p = malloc(sizeof(float) * (n + 1));
    memcpy(p, src, sizeof(float) * n);
    return p;
}

/* norm(gpu - cpu) / norm(cpu - init) over a rows x cols block (row stride
 * `stride`): the error of an accumulated result (parameter gradients are
 * added to) relative to what was added to it. +Inf on a NaN. */
static inline double rel_err_added_rows(const float *gpu, const float *cpu, const float *init, int rows, int cols,
                                        int stride) {
    double d = 0, s = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            size_t k = (size_t)r * stride + c;
            if (gpu[k] != gpu[k]) return INFINITY;
            d += ((double)gpu[k] - cpu[k]) * ((double)gpu[k] - cpu[k]);
            s += ((double)cpu[k] - init[k]) * ((double)cpu[k] - init[k]);
        }
    return s > 0 ? sqrt(d / s) : sqrt(d);
}
static inline double rel_err_added(const float *gpu, const float *cpu, const float *init, size_t n) {
    return rel_err_added_rows(gpu, cpu, init, 1, (int)n, (int)n);
}
#else
#define CUDA_TEST_BEGIN()                                                                                       \
    do {                                                                                                        \
        printf("skipped: %s\n", st_cuda_describe());                                                            \
        return ST_TEST_SKIP;                                                                                    \
    } while (0)
#endif

/* norm(a - b) / norm(b) over a rows x cols block of each (own strides);
 * +Inf when a holds a NaN in the block. */
static inline double rel_err_rows(const float *a, int a_stride, const float *b, int b_stride, int rows, int cols) {
    double d = 0, n = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            double x = a[(size_t)r * a_stride + c], y = b[(size_t)r * b_stride + c];
            if (x != x) return INFINITY;
            d += (x - y) * (x - y);
            n += y * y;
        }
    return n > 0 ? sqrt(d / n) : sqrt(d);
}
static inline double rel_err(const float *a, const float *b, size_t n) { return rel_err_rows(a, (int)n, b, (int)n, 1, (int)n); }

#define CHECK_PARITY(name, err, bound)                                                                          \
    do {                                                                                                        \
        printf("  %-36s rel err %.3e (bound %.0e)\n", (name), (err), (double)(bound));                        \
        CHECK((err) <= (bound), "%s: GPU vs CPU rel err %.3e > %.0e", (name), (err), (double)(bound));          \
    } while (0)

#endif
