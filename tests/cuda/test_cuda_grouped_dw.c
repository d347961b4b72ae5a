/* test_cuda_grouped_dw.c: st_cuda_grouped_dw (the stacked GRNs' weight
 * gradients in one launch) against a float64 reference on fresh random
 * inputs: dW[g] += dy_g^T x_g with the groups side by side in padded rows
 * (as the VSN lays them out), dW starting from random values (the
 * gradients accumulate), shapes that take the kernel (one row split, many
 * splits with a short last one) and one that takes the cuBLAS products;
 * the kernel against the cuBLAS path on the same inputs; reruns
 * bit-identical. Skipped without a GPU. */
#include <stdint.h>

#include "cuda_test.h"

#ifdef ST_HAVE_CUDA
#include "cuda/grouped_dw_cuda.h"

typedef struct {
    const char *name;
    int rows, groups, in, out;
    int aligned; /* row strides multiples of 4 (the kernel's 16-byte copies) or odd (its 4-byte ones) */
} gdw_case;

/* dW after one call on the GPU (dW starting at init). */
static float *gpu_dw(const gdw_case *c, const float *dy, int dy_stride, const float *x, int x_stride,
                     const float *init) {
    const size_t ndy = (size_t)c->rows * dy_stride, nx = (size_t)c->rows * x_stride;
    const size_t nw = (size_t)c->groups * c->out * c->in;
    float *ddy = dev_upload(dy, ndy), *dx = dev_upload(x, nx), *dw = dev_upload(init, nw);
    int rc =
        st_cuda_grouped_dw(c->rows, c->groups, c->in, c->out, ddy, dy_stride, c->out, dx, x_stride, c->in, dw, NULL);
    CHECK(rc == 0, "%s: st_cuda_grouped_dw returned %d", c->name, rc);
    float *h = dev_download_new(dw, nw);
    dev_free(ddy), dev_free(dx), dev_free(dw);
    return h;
}

static void run_case(const gdw_case *c, uint64_t seed) {
    /* padded rows: by 4 and 8 floats (aligned) or 3 and 5 */
    const int dy_stride = c->groups * c->out + (c->aligned ? 4 : 3),
              x_stride = c->groups * c->in + (c->aligned ? 8 : 5);
    const size_t ndy = (size_t)c->rows * dy_stride, nx = (size_t)c->rows * x_stride;
    const size_t nw = (size_t)c->groups * c->out * c->in;
    float *dy = host_randn_scaled(ndy, 1.0f, seed, 1), *x = host_randn_scaled(nx, 1.0f, seed, 2);
    float *init = host_randn_scaled(nw, 10.0f, seed, 3);
    double *ref = malloc(sizeof(double) * nw);
    float *reff = malloc(sizeof(float) * nw);
    for (size_t i = 0; i < nw; i++)
        ref[i] = init[i];
    for (int r = 0; r < c->rows; r++)
        for (int g = 0; g < c->groups; g++) {
            const float *d = dy + (size_t)r * dy_stride + (size_t)g * c->out;
            const float *v = x + (size_t)r * x_stride + (size_t)g * c->in;
            double *w = ref + (size_t)g * c->out * c->in;
            for (int o = 0; o < c->out; o++)
                for (int i = 0; i < c->in; i++)
                    w[(size_t)o * c->in + i] += (double)d[o] * v[i];
        }
    for (size_t i = 0; i < nw; i++)
        reff[i] = (float)ref[i];
    printf("%s: rows %d, %d groups of %d x %d\n", c->name, c->rows, c->groups, c->out, c->in);
    float *k1 = gpu_dw(c, dy, dy_stride, x, x_stride, init), *k2 = gpu_dw(c, dy, dy_stride, x, x_stride, init);
    CHECK_PARITY("dW (default path) vs float64", rel_err_added(k1, reff, init, nw), 1e-5);
    CHECK(memcmp(k1, k2, sizeof(float) * nw) == 0, "%s: two runs differ in their bits", c->name);
    st_cuda_grouped_dw_set_kernel(0);
    float *cb = gpu_dw(c, dy, dy_stride, x, x_stride, init);
    st_cuda_grouped_dw_set_kernel(1);
    CHECK_PARITY("dW (cuBLAS products) vs float64", rel_err_added(cb, reff, init, nw), 1e-5);
    free(dy), free(x), free(init), free(ref), free(reff), free(k1), free(k2), free(cb);
}
#endif

int main(void) {
    CUDA_TEST_BEGIN();
#ifdef ST_HAVE_CUDA
    const int long_rows = test_quick() ? 9001 : 70001;
    const gdw_case cases[] = {
        {"default glu_w, rows of 2 windows (one split)", 128, 40, 32, 64, 1},
        {"default glu_w, many splits, the last short", long_rows, 6, 32, 64, 1},
        {"default glu_w, many splits, odd strides", long_rows, 6, 32, 64, 0},
        {"default fc2_w", 4099, 40, 32, 32, 1},
        {"default fc2_w, odd strides", 4099, 40, 32, 32, 0},
        {"tiny glu_w (Dv 8)", 2050, 40, 8, 16, 1},
        {"tiny fc2_w (Dv 8), odd strides", 64, 40, 8, 8, 0},
        {"odd 24 -> 48 (headdim-like sizes)", 3001, 7, 24, 48, 0},
        {"out 6, in 5: the cuBLAS products", 1500, 3, 5, 6, 0},
        {"one row", 1, 4, 32, 64, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i], 7000 + i);
#endif
    TEST_MAIN_END();
}
