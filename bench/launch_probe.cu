/* launch_probe.cu: what a kernel boundary costs inside a CUDA graph on this
 * card, and what programmatic dependent launch (PDL) takes off it. A chain
 * of N small kernels (each reads and rewrites ROWS x 256 floats, the size
 * of an action step's element-wise kernel at 128 envs, or does nothing) is
 * captured three ways: plain launches; launches with
 * cudaLaunchAttributeProgrammaticStreamSerialization and griddepcontrol.wait
 * at each kernel's top (the trigger implicit at each block's exit); the same
 * with griddepcontrol.launch_dependents right after the wait. Each graph is
 * replayed REPS times; the median replay over N is the cost of one kernel.
 * Build and run on the GPU machine:
 *   nvcc -O3 -arch=sm_90 -o /tmp/launch_probe bench/launch_probe.cu && /tmp/launch_probe
 * Prints one line a (work, mode): us a kernel, and the chain's check sum
 * against the plain chain's (a wait in the wrong place changes it). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                                \
    do {                                                                                     \
        cudaError_t e_ = (x);                                                                \
        if (e_ != cudaSuccess) {                                                             \
            fprintf(stderr, "launch_probe: %s at %s:%d: %s\n", #x, __FILE__, __LINE__,       \
                    cudaGetErrorString(e_));                                                 \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

enum { N_KERNELS = 50, REPS = 200, COLS = 256 };

/* y = 0.5 y + x (a dependent chain: each kernel reads what the last wrote) */
__global__ void step_kernel(float *y, const float *x, int n, int mode) {
    if (mode >= 1) asm volatile("griddepcontrol.wait;" ::: "memory");
    if (mode == 2) asm volatile("griddepcontrol.launch_dependents;");
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = 0.5f * y[i] + x[i];
}

static void launch(float *y, const float *x, int n, int mode, cudaStream_t s) {
    int blocks = n > 0 ? (n + 255) / 256 : 1;
    if (blocks > 1056) blocks = 1056;
    cudaLaunchConfig_t cfg = {0};
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(256);
    cfg.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = mode >= 1 ? 1 : 0;
    CK(cudaLaunchKernelEx(&cfg, step_kernel, y, x, n, mode));
}

static int cmp(const void *a, const void *b) {
    float fa = *(const float *)a, fb = *(const float *)b;
    return fa < fb ? -1 : fa > fb;
}

int main(void) {
    const int rows_set[3] = {0, 8192, 65536};
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int r = 0; r < 3; r++) {
        int n = rows_set[r] * COLS / 8; /* 8 columns' worth: a small kernel's bytes */
        size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(float);
        float *x, *y;
        CK(cudaMalloc(&x, bytes));
        CK(cudaMalloc(&y, bytes));
        float *h = (float *)malloc(bytes);
        for (int i = 0; i < (n > 0 ? n : 1); i++) h[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
        CK(cudaMemcpy(x, h, bytes, cudaMemcpyHostToDevice));
        double ref = 0;
        for (int mode = 0; mode < 3; mode++) {
            CK(cudaMemsetAsync(y, 0, bytes, s)); /* on s: the legacy stream does not order a non-blocking one */
            cudaGraph_t g;
            cudaGraphExec_t ge;
            CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
            for (int k = 0; k < N_KERNELS; k++) launch(y, x, n, mode, s);
            CK(cudaStreamEndCapture(s, &g));
            CK(cudaGraphInstantiate(&ge, g, 0));
            float t[REPS];
            for (int w = 0; w < 10; w++) CK(cudaGraphLaunch(ge, s));
            for (int i = 0; i < REPS; i++) {
                CK(cudaEventRecord(e0, s));
                CK(cudaGraphLaunch(ge, s));
                CK(cudaEventRecord(e1, s));
                CK(cudaEventSynchronize(e1));
                CK(cudaEventElapsedTime(&t[i], e0, e1));
            }
            qsort(t, REPS, sizeof(float), cmp);
            /* the sum after one more replay from y = 0 (the same chain each mode) */
            CK(cudaMemsetAsync(y, 0, bytes, s));
            CK(cudaGraphLaunch(ge, s));
            CK(cudaStreamSynchronize(s));
            CK(cudaMemcpy(h, y, bytes, cudaMemcpyDeviceToHost));
            double sum = 0;
            for (int i = 0; i < n; i++) sum += h[i];
            if (mode == 0) ref = sum;
            printf("rows %6d (%8zu B a kernel): mode %-22s %7.3f us a kernel (median of %d, %d kernels), "
                   "sum %s\n",
                   rows_set[r], 2 * bytes,
                   mode == 0 ? "plain" : mode == 1 ? "pdl wait" : "pdl wait+trigger",
                   1000.0f * t[REPS / 2] / N_KERNELS, REPS, N_KERNELS,
                   sum == ref ? "matches plain" : "DIFFERS from plain");
            CK(cudaGraphExecDestroy(ge));
            CK(cudaGraphDestroy(g));
        }
        free(h);
        CK(cudaFree(x));
        CK(cudaFree(y));
    }
    return 0;
}
