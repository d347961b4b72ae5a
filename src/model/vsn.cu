/* vsn.cu: the Variable Selection Network on the GPU (float32 storage,
 * double accumulation), forward and backward; the C API is cuda/vsn_cuda.h
 * and the math that of model/vsn.c (DESIGN section 5):
 *     e_j   = s_j * embed_w[j] + embed_b[j]            [Dv] each, E [rows, P], P = F*Dv
 *     alpha = softmax(GRN_sel(E, c))                   [F], Hs = min(Dv, F)
 *     t_j   = GRN_j(e_j)                               [Dv]
 *     v     = sum_j alpha_j t_j                        [Dv]
 *     GRN(a, c) = LayerNorm(skip(a) + g1 sigma(g2)), [g1; g2] = glu(fc2(ELU(fc1(a) + ctx(c))))
 * s and c are read through their own row strides only (the regression of
 * DESIGN section 1: the window's rows are F+C wide, never F).
 *
 * The selection GRN's linears run through cuBLAS (cuda/linear_cuda.h, in
 * its precision); the rest are plain kernels: one thread per output
 * element (the backward's dx products, element-wise steps), per row
 * (LayerNorm, softmax, the softmax backward) or per (row, variable) for the
 * fused per-variable GRNs, whose threads are ordered row-fastest so that a block
 * shares one variable and its weight reads are broadcasts. Parameter
 * gradients are reductions over all rows: the weight gradients are cuBLAS
 * products (dW += dy^T x, one per variable for the stacked GRNs), the
 * biases and the LayerNorm parameters column sums in double
 * (st_cuda_colsum_add, over per-row products for the LayerNorm weights):
 * no atomics, bit-identical run to run and independent of the callers'
 * strides. (A thread per weight summing the rows serially was half of a
 * default-preset training step: bench/NOTES.md.)
 *
 * `saved` has the layout of vsn.c (sel_h1, sel_h2, sel_glu with sigma(g2),
 * sel_x, sel_mean, sel_rstd, alpha, var_h1, var_h2, var_glu with sigma(g2),
 * var_x, var_mean, var_rstd); `work` holds E, dE, dgl [rows, 2P], dh2, dh1
 * [rows, P], dlog (the forward's logits), dxs [rows, F], dgls [rows, 2F],
 * dh2s, dh1s [rows, Hs]. */
#include "cuda/check.h"

extern "C" {
#include "cuda/linear_cuda.h"
#include "cuda/vsn_cuda.h"
#include "model/vsn.h"
}

#define VSN_THREADS 256
#define VSN_EPS 1e-5

typedef st_vsn_weights_f32 vsn_w;
typedef st_vsn_grads_f32 vsn_g;

static int hidden_sel(int F, int Dv) { return Dv < F ? Dv : F; }

/* ---- layouts ------------------------------------------------------------ */

/* Device pointers into `saved`, in the order and sizes of vsn.c. */
struct vsn_saved {
    float *sel_h1, *sel_h2, *sel_glu, *sel_x, *sel_mean, *sel_rstd, *alpha;
    float *var_h1, *var_h2, *var_glu, *var_x, *var_mean, *var_rstd;
    size_t total;
};

static vsn_saved saved_at(float *base, int rows, int F, int Dv) {
    size_t R = (size_t)rows, P = (size_t)F * Dv, Hs = (size_t)hidden_sel(F, Dv), o = 0;
    vsn_saved l;
#define VSN_TAKE(field, n) (l.field = base ? base + o : NULL, o += (n))
    VSN_TAKE(sel_h1, R * Hs);
    VSN_TAKE(sel_h2, R * Hs);
    VSN_TAKE(sel_glu, R * 2 * F);
    VSN_TAKE(sel_x, R * F);
    VSN_TAKE(sel_mean, R);
    VSN_TAKE(sel_rstd, R);
    VSN_TAKE(alpha, R * F);
    VSN_TAKE(var_h1, R * P);
    VSN_TAKE(var_h2, R * P);
    VSN_TAKE(var_glu, R * 2 * P);
    VSN_TAKE(var_x, R * P);
    VSN_TAKE(var_mean, R * F);
    VSN_TAKE(var_rstd, R * F);
    l.total = o;
    return l;
}

/* Device pointers into `work`. */
struct vsn_work {
    float *E, *dE, *dgl, *dh2, *dh1, *dlog, *dxs, *dgls, *dh2s, *dh1s;
    size_t total;
};

static vsn_work work_at(float *base, int rows, int F, int Dv) {
    size_t R = (size_t)rows, P = (size_t)F * Dv, Hs = (size_t)hidden_sel(F, Dv), o = 0;
    vsn_work l;
    VSN_TAKE(E, R * P);
    VSN_TAKE(dE, R * P);
    VSN_TAKE(dgl, R * 2 * P);
    VSN_TAKE(dh2, R * P);
    VSN_TAKE(dh1, R * P);
    VSN_TAKE(dlog, R * F);
    VSN_TAKE(dxs, R * F);
    VSN_TAKE(dgls, R * 2 * F);
    VSN_TAKE(dh2s, R * Hs);
    VSN_TAKE(dh1s, R * Hs);
#undef VSN_TAKE
    l.total = o;
    return l;
}

extern "C" size_t st_cuda_vsn_saved_count(int rows, int F, int C, int Dv) {
    (void)C;
    if (rows <= 0 || F <= 0 || Dv <= 0) return 0;
    return saved_at(NULL, rows, F, Dv).total;
}

extern "C" size_t st_cuda_vsn_work_count(int rows, int F, int C, int Dv) {
    (void)C;
    if (rows <= 0 || F <= 0 || Dv <= 0) return 0;
    return work_at(NULL, rows, F, Dv).total;
}

/* ---- scalar helpers (as act.h) ------------------------------------------ */

__device__ static float dev_sigmoid(float x) {
    if (x >= 0) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}
__device__ static float dev_elu(float x) { return x > 0 ? x : expm1f(x); }
/* d ELU(x)/dx given h = ELU(x): 1 where h > 0, else e^x = h + 1. */
__device__ static float elu_grad_from_out(float h) { return h > 0 ? 1.0f : h + 1.0f; }
/* xhat of a LayerNorm as vsn.c computes it (rounded to float). */
__device__ static float xhat_of(float x, float mean, float rstd) {
    return (float)(((double)x - (double)mean) * (double)rstd);
}

#define GRID_LOOP(i, n)                                                                                                \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* Launches kernel over n elements (none when n == 0) with grid-stride loops. */
template <typename... Params, typename... Args>
static int launch_n(size_t n, cudaStream_t st, void (*kernel)(Params...), Args... args) {
    if (n == 0) return ST_OK;
    size_t blocks = (n + VSN_THREADS - 1) / VSN_THREADS;
    if (blocks > (1u << 30)) blocks = 1u << 30;
    kernel<<<(unsigned)blocks, VSN_THREADS, 0, st>>>(args...);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

/* ---- generic kernels ---------------------------------------------------- */

/* E[r, j*Dv+k] = s[r, j] * ew[j, k] + eb[j, k]. */
static __global__ void embed_kernel(int rows, int F, int Dv, const float *s, int s_stride, const float *ew,
                                    const float *eb, float *E) {
    const size_t P = (size_t)F * Dv;
    GRID_LOOP(idx, (size_t)rows * P) {
        size_t r = idx / P, jk = idx % P, j = jk / (size_t)Dv;
        E[idx] = s[r * (size_t)s_stride + j] * ew[jk] + eb[jk];
    }
}

/* x = ELU(x) over n contiguous values. */
static __global__ void elu_kernel(size_t n, float *x) {
    GRID_LOOP(i, n) x[i] = dev_elu(x[i]);
}

/* dx[r, i] (=|+=) dy[r] . W[:, i], times ELU'(h[r, i]) when h is given
 * (h = ELU output, the activation's saved value). W [out, in]. */
static __global__ void linear_dx_kernel(int rows, int in, int out, const float *dy, int dy_stride, const float *W,
                                        const float *h, int h_stride, float *dx, int dx_stride, int accumulate) {
    GRID_LOOP(idx, (size_t)rows * in) {
        size_t r = idx / (size_t)in, i = idx % (size_t)in;
        const float *dyr = dy + r * (size_t)dy_stride;
        double acc = 0;
        for (int o = 0; o < out; o++)
            acc += (double)dyr[o] * (double)W[(size_t)o * in + i];
        float d = (float)acc;
        if (h) d *= elu_grad_from_out(h[r * (size_t)h_stride + i]);
        float *dst = dx + r * (size_t)dx_stride + i;
        *dst = accumulate ? *dst + d : d;
    }
}

/* LayerNorm over n per row (one thread a row), statistics in double. */
static __global__ void layernorm_rows_kernel(int rows, int n, const float *x, int x_stride, const float *w,
                                             const float *b, float *y, int y_stride, float *mean, float *rstd) {
    GRID_LOOP(r, (size_t)rows) {
        const float *xr = x + r * (size_t)x_stride;
        double s = 0, v = 0;
        for (int i = 0; i < n; i++)
            s += xr[i];
        double mu = s / n;
        for (int i = 0; i < n; i++)
            v += ((double)xr[i] - mu) * ((double)xr[i] - mu);
        double rs = 1.0 / sqrt(v / n + VSN_EPS);
        for (int i = 0; i < n; i++)
            y[r * (size_t)y_stride + i] = (float)(((double)xr[i] - mu) * rs) * w[i] + b[i];
        mean[r] = (float)mu;
        rstd[r] = (float)rs;
    }
}

/* LayerNorm's input gradient per row: dx = rstd (g - mean(g) - xhat
 * mean(g xhat)), g = dy w. */
static __global__ void layernorm_dx_kernel(int rows, int n, const float *x, int x_stride, const float *w,
                                           const float *mean, const float *rstd, const float *dy, int dy_stride,
                                           float *dx, int dx_stride) {
    GRID_LOOP(r, (size_t)rows) {
        const float *xr = x + r * (size_t)x_stride, *gr = dy + r * (size_t)dy_stride;
        double mu = mean[r], rs = rstd[r], sg = 0, sgx = 0;
        for (int i = 0; i < n; i++) {
            double g = (double)gr[i] * w[i];
            sg += g;
            sgx += g * (((double)xr[i] - mu) * rs);
        }
        sg /= n;
        sgx /= n;
        for (int i = 0; i < n; i++) {
            double xh = ((double)xr[i] - mu) * rs, g = (double)gr[i] * w[i];
            dx[r * (size_t)dx_stride + i] = (float)(rs * (g - sg - xh * sgx));
        }
    }
}

/* out[r, i] = xhat[r, i] dy[r, i]: the LayerNorm weight gradient's per-row
 * terms (their column sums are the gradient). */
static __global__ void ln_prod_kernel(int rows, int n, const float *x, int x_stride, const float *mean,
                                      const float *rstd, const float *dy, int dy_stride, float *out, int out_stride) {
    GRID_LOOP(idx, (size_t)rows * n) {
        size_t r = idx / (size_t)n, i = idx % (size_t)n;
        out[r * (size_t)out_stride + i] =
            xhat_of(x[r * (size_t)x_stride + i], mean[r], rstd[r]) * dy[r * (size_t)dy_stride + i];
    }
}

/* ---- the selection GRN's own steps -------------------------------------- */

/* x[r, i] += g1 sigma(g2) with gl rows [g1 (F); g2 (F)]; g2 becomes sigma(g2). */
static __global__ void sel_gate_kernel(int rows, int F, float *gl, float *x) {
    GRID_LOOP(idx, (size_t)rows * F) {
        size_t r = idx / (size_t)F, i = idx % (size_t)F;
        float *g = gl + r * 2 * (size_t)F;
        float sg = dev_sigmoid(g[F + i]);
        g[F + i] = sg;
        x[idx] += g[i] * sg;
    }
}

/* d g1 = dx sg, d g2 = dx g1 sg (1 - sg), with gl holding [g1; sg]. */
static __global__ void sel_gate_bwd_kernel(int rows, int F, const float *gl, const float *dx, float *dgl) {
    GRID_LOOP(idx, (size_t)rows * F) {
        size_t r = idx / (size_t)F, i = idx % (size_t)F;
        const float *g = gl + r * 2 * (size_t)F;
        float sg = g[F + i], d = dx[idx];
        dgl[r * 2 * (size_t)F + i] = d * sg;
        dgl[r * 2 * (size_t)F + F + i] = d * g[i] * sg * (1.0f - sg);
    }
}

/* alpha = softmax(logits) per row, max subtracted, sums in double; into the
 * saved copy and (when given) the caller's strided output. */
static __global__ void softmax_kernel(int rows, int F, const float *logits, float *alpha_saved, float *alpha,
                                      int alpha_stride) {
    GRID_LOOP(r, (size_t)rows) {
        const float *l = logits + r * (size_t)F;
        double m = l[0], sum = 0;
        for (int j = 1; j < F; j++)
            m = l[j] > m ? l[j] : m;
        for (int j = 0; j < F; j++)
            sum += exp((double)l[j] - m);
        for (int j = 0; j < F; j++) {
            float a = (float)(exp((double)l[j] - m) / sum);
            alpha_saved[r * (size_t)F + j] = a;
            if (alpha) alpha[r * (size_t)alpha_stride + j] = a;
        }
    }
}

/* ---- the per-variable GRNs ---------------------------------------------- */

/* One thread per (row r, variable j), r fastest: the whole GRN_j of row r,
 * each layer's output saved (and read back as the next layer's input):
 * h1 = ELU(fc1 e), h2 = fc2 h1, gl = glu h2 (g2 -> sigma), x = e + g1 sg,
 * and the LayerNorm statistics of x. */
static __global__ void var_forward_kernel(int rows, int F, int Dv, const float *E, vsn_w w, vsn_saved sv) {
    const size_t P = (size_t)F * Dv, DD = (size_t)Dv * Dv;
    GRID_LOOP(idx, (size_t)rows * F) {
        size_t r = idx % (size_t)rows, j = idx / (size_t)rows, col = j * (size_t)Dv;
        const float *e = E + r * P + col;
        float *h1 = sv.var_h1 + r * P + col, *h2 = sv.var_h2 + r * P + col;
        float *gl = sv.var_glu + r * 2 * P + 2 * col, *x = sv.var_x + r * P + col;
        const float *W1 = w.var_fc1_w + j * DD, *W2 = w.var_fc2_w + j * DD, *Wg = w.var_glu_w + 2 * j * DD;
        for (int o = 0; o < Dv; o++) {
            double acc = w.var_fc1_b[col + o];
            for (int i = 0; i < Dv; i++)
                acc += (double)W1[(size_t)o * Dv + i] * (double)e[i];
            h1[o] = dev_elu((float)acc);
        }
        for (int o = 0; o < Dv; o++) {
            double acc = w.var_fc2_b[col + o];
            for (int i = 0; i < Dv; i++)
                acc += (double)W2[(size_t)o * Dv + i] * (double)h1[i];
            h2[o] = (float)acc;
        }
        for (int o = 0; o < 2 * Dv; o++) {
            double acc = w.var_glu_b[2 * col + o];
            for (int i = 0; i < Dv; i++)
                acc += (double)Wg[(size_t)o * Dv + i] * (double)h2[i];
            gl[o] = (float)acc;
        }
        double sum = 0;
        for (int k = 0; k < Dv; k++) {
            float sg = dev_sigmoid(gl[Dv + k]);
            gl[Dv + k] = sg;
            x[k] = e[k] + gl[k] * sg;
            sum += x[k];
        }
        double mu = sum / Dv, var = 0;
        for (int k = 0; k < Dv; k++)
            var += ((double)x[k] - mu) * ((double)x[k] - mu);
        sv.var_mean[r * F + j] = (float)mu;
        sv.var_rstd[r * F + j] = (float)(1.0 / sqrt(var / Dv + VSN_EPS));
    }
}

/* t_j[k] of row r from the saved LayerNorm input and statistics. */
__device__ static float var_t(const vsn_w &w, const vsn_saved &sv, size_t r, int F, int Dv, int j, int k) {
    const size_t P = (size_t)F * Dv, col = (size_t)j * Dv;
    float xh = xhat_of(sv.var_x[r * P + col + k], sv.var_mean[r * F + j], sv.var_rstd[r * F + j]);
    return xh * w.var_ln_w[col + k] + w.var_ln_b[col + k];
}

/* v[r, k] = sum_j alpha_j t_j[k], summed in variable order. */
static __global__ void combine_kernel(int rows, int F, int Dv, vsn_w w, vsn_saved sv, float *v, int v_stride) {
    GRID_LOOP(idx, (size_t)rows * Dv) {
        size_t r = idx / (size_t)Dv;
        int k = (int)(idx % (size_t)Dv);
        double acc = 0;
        for (int j = 0; j < F; j++)
            acc += (double)sv.alpha[r * F + j] * (double)var_t(w, sv, r, F, Dv, j, k);
        v[r * (size_t)v_stride + k] = (float)acc;
    }
}

/* Per row: dalpha_j = dv . t_j (+ the caller's dalpha), then the softmax
 * backward dlog_j = alpha_j (dalpha_j - sum_i alpha_i dalpha_i). */
static __global__ void dlog_kernel(int rows, int F, int Dv, vsn_w w, vsn_saved sv, const float *dv, int dv_stride,
                                   const float *dalpha, int dalpha_stride, float *dlog) {
    GRID_LOOP(r, (size_t)rows) {
        const float *dvr = dv + r * (size_t)dv_stride, *a = sv.alpha + r * F;
        float *dl = dlog + r * F;
        double dot = 0;
        for (int j = 0; j < F; j++) {
            double da = dalpha ? (double)dalpha[r * (size_t)dalpha_stride + j] : 0.0;
            for (int k = 0; k < Dv; k++)
                da += (double)dvr[k] * (double)var_t(w, sv, r, F, Dv, j, k);
            dl[j] = (float)da;
            dot += (double)a[j] * da;
        }
        for (int j = 0; j < F; j++)
            dl[j] = (float)((double)a[j] * ((double)dl[j] - dot));
    }
}

/* One thread per (row r, variable j), r fastest: the backward of GRN_j from
 * dt_j = alpha_j dv: LayerNorm -> dx (the identity skip: dE = dx), the gate
 * -> dgl, glu -> dh2, fc2 and ELU -> dh1, fc1 -> dE += dh1 W1. */
static __global__ void var_backward_kernel(int rows, int F, int Dv, vsn_w w, vsn_saved sv, const float *dv,
                                           int dv_stride, vsn_work wk) {
    const size_t P = (size_t)F * Dv, DD = (size_t)Dv * Dv;
    GRID_LOOP(idx, (size_t)rows * F) {
        size_t r = idx % (size_t)rows, j = idx / (size_t)rows, col = j * (size_t)Dv;
        const float *dvr = dv + r * (size_t)dv_stride, *x = sv.var_x + r * P + col, *lw = w.var_ln_w + col;
        const float *gl = sv.var_glu + r * 2 * P + 2 * col, *h1 = sv.var_h1 + r * P + col;
        const float *W1 = w.var_fc1_w + j * DD, *W2 = w.var_fc2_w + j * DD, *Wg = w.var_glu_w + 2 * j * DD;
        float *dE = wk.dE + r * P + col, *dgl = wk.dgl + r * 2 * P + 2 * col;
        float *dh2 = wk.dh2 + r * P + col, *dh1 = wk.dh1 + r * P + col;
        double a = sv.alpha[r * F + j], mean = sv.var_mean[r * F + j], rs = sv.var_rstd[r * F + j];
        double sg = 0, sgx = 0;
        for (int k = 0; k < Dv; k++) {
            double gk = a * dvr[k] * lw[k];
            sg += gk;
            sgx += gk * xhat_of(x[k], (float)mean, (float)rs);
        }
        sg /= Dv;
        sgx /= Dv;
        for (int k = 0; k < Dv; k++) {
            double gk = a * dvr[k] * lw[k];
            float dx = (float)(rs * (gk - sg - xhat_of(x[k], (float)mean, (float)rs) * sgx));
            float sgt = gl[Dv + k];
            dE[k] = dx;
            dgl[k] = dx * sgt;
            dgl[Dv + k] = dx * gl[k] * sgt * (1.0f - sgt);
        }
        for (int i = 0; i < Dv; i++) {
            double acc = 0;
            for (int o = 0; o < 2 * Dv; o++)
                acc += (double)dgl[o] * (double)Wg[(size_t)o * Dv + i];
            dh2[i] = (float)acc;
        }
        for (int i = 0; i < Dv; i++) {
            double acc = 0;
            for (int o = 0; o < Dv; o++)
                acc += (double)dh2[o] * (double)W2[(size_t)o * Dv + i];
            dh1[i] = (float)acc * elu_grad_from_out(h1[i]);
        }
        for (int i = 0; i < Dv; i++) {
            double acc = 0;
            for (int o = 0; o < Dv; o++)
                acc += (double)dh1[o] * (double)W1[(size_t)o * Dv + i];
            dE[i] += (float)acc;
        }
    }
}

/* The per-variable norms' per-row terms: pb[r, j, k] = alpha_j dv_k (the
 * gradient reaching norm j's output), pw = pb xhat; var_ln_b and var_ln_w
 * gain their column sums. */
static __global__ void var_ln_prod_kernel(int rows, int F, int Dv, vsn_saved sv, const float *dv, int dv_stride,
                                          float *pw, float *pb) {
    const size_t P = (size_t)F * Dv;
    GRID_LOOP(idx, (size_t)rows * P) {
        size_t r = idx / P, jk = idx % P, j = jk / (size_t)Dv, k = jk % (size_t)Dv;
        float dt = sv.alpha[r * F + j] * dv[r * (size_t)dv_stride + k];
        pb[idx] = dt;
        pw[idx] = dt * xhat_of(sv.var_x[idx], sv.var_mean[r * F + j], sv.var_rstd[r * F + j]);
    }
}

/* ds[r, j] = dE[r, j, :] . embed_w[j]. */
static __global__ void embed_ds_kernel(int rows, int F, int Dv, const float *dE, const float *ew, float *ds,
                                       int ds_stride) {
    const size_t P = (size_t)F * Dv;
    GRID_LOOP(idx, (size_t)rows * F) {
        size_t r = idx / (size_t)F, j = idx % (size_t)F;
        double acc = 0;
        for (int k = 0; k < Dv; k++)
            acc += (double)dE[r * P + j * Dv + k] * (double)ew[j * Dv + k];
        ds[r * (size_t)ds_stride + j] = (float)acc;
    }
}

/* ---- host: forward ------------------------------------------------------- */

static int vsn_check_sizes(int rows, int F, int C, int Dv) {
    ST_REQUIRE(rows >= 0 && F > 0 && C >= 0 && Dv > 0, ST_ERR_INPUT,
               "VSN on the GPU: bad sizes rows=%d F=%d C=%d Dv=%d", rows, F, C, Dv);
    return ST_OK;
}

/* The selection GRN: E, c -> logits (in work) and alpha. */
static int sel_forward(int rows, int F, int C, int Dv, const float *c, int c_stride, const vsn_w &w,
                       const vsn_saved &sv, const vsn_work &wk, float *alpha, int alpha_stride, cudaStream_t st) {
    const int P = F * Dv, Hs = hidden_sel(F, Dv);
    const size_t R = (size_t)rows;
    /* fc1 (+ ctx, then ELU), fc2, glu and the skip: cuBLAS products */
    ST_TRY(st_cuda_linear_forward(rows, P, Hs, wk.E, P, w.sel_fc1_w, w.sel_fc1_b, sv.sel_h1, Hs, st));
    if (C > 0) ST_TRY(st_cuda_gemm(0, 1, rows, Hs, C, 1.0f, c, c_stride, w.sel_ctx_w, C, 1.0f, sv.sel_h1, Hs, st));
    ST_TRY(launch_n(R * Hs, st, elu_kernel, R * Hs, sv.sel_h1));
    ST_TRY(st_cuda_linear_forward(rows, Hs, Hs, sv.sel_h1, Hs, w.sel_fc2_w, w.sel_fc2_b, sv.sel_h2, Hs, st));
    ST_TRY(st_cuda_linear_forward(rows, Hs, 2 * F, sv.sel_h2, Hs, w.sel_glu_w, w.sel_glu_b, sv.sel_glu, 2 * F, st));
    ST_TRY(st_cuda_linear_forward(rows, P, F, wk.E, P, w.sel_skip_w, w.sel_skip_b, sv.sel_x, F, st));
    ST_TRY(launch_n(R * F, st, sel_gate_kernel, rows, F, sv.sel_glu, sv.sel_x));
    ST_TRY(launch_n(R, st, layernorm_rows_kernel, rows, F, (const float *)sv.sel_x, F, w.sel_norm_w, w.sel_norm_b,
                    wk.dlog, F, sv.sel_mean, sv.sel_rstd));
    ST_TRY(launch_n(R, st, softmax_kernel, rows, F, (const float *)wk.dlog, sv.alpha, alpha, alpha_stride));
    return ST_OK;
}

extern "C" int st_cuda_vsn_forward(int rows, int F, int C, int Dv, const float *s, int s_stride, const float *c,
                                   int c_stride, const struct st_vsn_weights_f32 *w, float *v, int v_stride,
                                   float *alpha, int alpha_stride, float *saved, float *work, void *stream) {
    ST_TRY(vsn_check_sizes(rows, F, C, Dv));
    if (rows == 0) return ST_OK;
    cudaStream_t st = (cudaStream_t)stream;
    const size_t R = (size_t)rows;
    vsn_saved sv = saved_at(saved, rows, F, Dv);
    vsn_work wk = work_at(work, rows, F, Dv);
    ST_TRY(launch_n(R * F * Dv, st, embed_kernel, rows, F, Dv, s, s_stride, w->embed_w, w->embed_b, wk.E));
    ST_TRY(sel_forward(rows, F, C, Dv, c, c_stride, *w, sv, wk, alpha, alpha_stride, st));
    ST_TRY(launch_n(R * F, st, var_forward_kernel, rows, F, Dv, (const float *)wk.E, *w, sv));
    ST_TRY(launch_n(R * Dv, st, combine_kernel, rows, F, Dv, *w, sv, v, v_stride));
    return ST_OK;
}

/* ---- host: backward ------------------------------------------------------ */

/* dy [rows, out] (stride dy_stride) of a linear on x: dW += dy^T x, db += colsum dy. */
static int linear_params(int rows, int in, int out, const float *x, int x_stride, const float *dy, int dy_stride,
                         float *dW, float *db, cudaStream_t st) {
    return st_cuda_linear_backward(rows, in, out, x, x_stride, NULL, dy, dy_stride, NULL, 0, 0, dW, db, st);
}

/* The stacked GRNs' weight gradients: for each variable g < groups,
 * dW[g] ([out, in]) += dy_g^T x_g with dy_g = dy + g*dy_goff and
 * x_g = x + g*x_goff (row strides dy_stride, x_stride). */
static int grouped_dw(int rows, int groups, int in, int out, const float *dy, int dy_stride, int dy_goff,
                      const float *x, int x_stride, int x_goff, float *dW, cudaStream_t st) {
    for (int g = 0; g < groups; g++)
        ST_TRY(st_cuda_gemm(1, 0, out, in, rows, 1.0f, dy + (size_t)g * dy_goff, dy_stride, x + (size_t)g * x_goff,
                            x_stride, 1.0f, dW + (size_t)g * out * in, in, st));
    return ST_OK;
}

/* The selection GRN's backward from dlog (in work): its parameter
 * gradients, dE += the skip and fc1 paths, dc (=|+=) the ctx path. */
static int sel_backward(int rows, int F, int C, int Dv, const float *c, int c_stride, const vsn_w &w, const vsn_g &g,
                        const vsn_saved &sv, const vsn_work &wk, float *dc, int dc_stride, int dc_accumulate,
                        cudaStream_t st) {
    const int P = F * Dv, Hs = hidden_sel(F, Dv);
    const size_t R = (size_t)rows;
    ST_TRY(launch_n(R, st, layernorm_dx_kernel, rows, F, (const float *)sv.sel_x, F, w.sel_norm_w,
                    (const float *)sv.sel_mean, (const float *)sv.sel_rstd, (const float *)wk.dlog, F, wk.dxs, F));
    /* the norm's parameters: dw += colsum(xhat dy) (the products in dgls, not yet used), db += colsum(dy) */
    ST_TRY(launch_n(R * F, st, ln_prod_kernel, rows, F, (const float *)sv.sel_x, F, (const float *)sv.sel_mean,
                    (const float *)sv.sel_rstd, (const float *)wk.dlog, F, wk.dgls, F));
    ST_TRY(st_cuda_colsum_add(rows, F, wk.dgls, F, g.sel_norm_w, st));
    ST_TRY(st_cuda_colsum_add(rows, F, wk.dlog, F, g.sel_norm_b, st));
    ST_TRY(
        launch_n(R * F, st, sel_gate_bwd_kernel, rows, F, (const float *)sv.sel_glu, (const float *)wk.dxs, wk.dgls));
    /* skip: dE += dxs W_skip */
    ST_TRY(launch_n(R * P, st, linear_dx_kernel, rows, P, F, (const float *)wk.dxs, F, w.sel_skip_w,
                    (const float *)NULL, 0, wk.dE, P, 1));
    ST_TRY(linear_params(rows, P, F, wk.E, P, wk.dxs, F, g.sel_skip_w, g.sel_skip_b, st));
    /* glu: dh2s = dgls W_glu */
    ST_TRY(launch_n(R * Hs, st, linear_dx_kernel, rows, Hs, 2 * F, (const float *)wk.dgls, 2 * F, w.sel_glu_w,
                    (const float *)NULL, 0, wk.dh2s, Hs, 0));
    ST_TRY(linear_params(rows, Hs, 2 * F, sv.sel_h2, Hs, wk.dgls, 2 * F, g.sel_glu_w, g.sel_glu_b, st));
    /* fc2 and the ELU: dh1s = (dh2s W_fc2) ELU'(h1) */
    ST_TRY(launch_n(R * Hs, st, linear_dx_kernel, rows, Hs, Hs, (const float *)wk.dh2s, Hs, w.sel_fc2_w,
                    (const float *)sv.sel_h1, Hs, wk.dh1s, Hs, 0));
    ST_TRY(linear_params(rows, Hs, Hs, sv.sel_h1, Hs, wk.dh2s, Hs, g.sel_fc2_w, g.sel_fc2_b, st));
    /* fc1: dE += dh1s W_fc1; ctx: dc (=|+=) dh1s W_ctx */
    ST_TRY(launch_n(R * P, st, linear_dx_kernel, rows, P, Hs, (const float *)wk.dh1s, Hs, w.sel_fc1_w,
                    (const float *)NULL, 0, wk.dE, P, 1));
    ST_TRY(linear_params(rows, P, Hs, wk.E, P, wk.dh1s, Hs, g.sel_fc1_w, g.sel_fc1_b, st));
    if (dc && C > 0)
        ST_TRY(launch_n(R * C, st, linear_dx_kernel, rows, C, Hs, (const float *)wk.dh1s, Hs, w.sel_ctx_w,
                        (const float *)NULL, 0, dc, dc_stride, dc_accumulate));
    if (C > 0) ST_TRY(linear_params(rows, C, Hs, c, c_stride, wk.dh1s, Hs, g.sel_ctx_w, (float *)NULL, st));
    return ST_OK;
}

/* The per-variable GRNs' parameter gradients (grouped over variables) and
 * their biases as column sums. */
static int var_params(int rows, int F, int Dv, const vsn_g &g, const vsn_saved &sv, const vsn_work &wk,
                      cudaStream_t st) {
    const int P = F * Dv;
    const size_t DD = (size_t)Dv * Dv;
    (void)DD;
    ST_TRY(grouped_dw(rows, F, Dv, 2 * Dv, wk.dgl, 2 * P, 2 * Dv, sv.var_h2, P, Dv, g.var_glu_w, st));
    ST_TRY(st_cuda_colsum_add(rows, 2 * P, wk.dgl, 2 * P, g.var_glu_b, st));
    ST_TRY(grouped_dw(rows, F, Dv, Dv, wk.dh2, P, Dv, sv.var_h1, P, Dv, g.var_fc2_w, st));
    ST_TRY(st_cuda_colsum_add(rows, P, wk.dh2, P, g.var_fc2_b, st));
    ST_TRY(grouped_dw(rows, F, Dv, Dv, wk.dh1, P, Dv, wk.E, P, Dv, g.var_fc1_w, st));
    ST_TRY(st_cuda_colsum_add(rows, P, wk.dh1, P, g.var_fc1_b, st));
    return ST_OK;
}

extern "C" int st_cuda_vsn_backward_ex(int rows, int F, int C, int Dv, const float *s, int s_stride, const float *c,
                                       int c_stride, const struct st_vsn_weights_f32 *w, const float *saved,
                                       const float *dv, int dv_stride, const float *dalpha, int dalpha_stride,
                                       float *ds, int ds_stride, float *dc, int dc_stride, int dc_accumulate,
                                       const struct st_vsn_grads_f32 *g, float *work, void *stream) {
    ST_TRY(vsn_check_sizes(rows, F, C, Dv));
    if (rows == 0) return ST_OK;
    cudaStream_t st = (cudaStream_t)stream;
    const size_t R = (size_t)rows, P = (size_t)F * Dv;
    /* The kernels only read `saved` in the backward. */
    vsn_saved sv = saved_at((float *)saved, rows, F, Dv);
    vsn_work wk = work_at(work, rows, F, Dv);
    ST_TRY(launch_n(R * P, st, embed_kernel, rows, F, Dv, s, s_stride, w->embed_w, w->embed_b, wk.E));
    ST_TRY(launch_n(R, st, dlog_kernel, rows, F, Dv, *w, sv, dv, dv_stride, dalpha, dalpha_stride, wk.dlog));
    ST_TRY(launch_n(R * F, st, var_backward_kernel, rows, F, Dv, *w, sv, dv, dv_stride, wk));
    ST_TRY(var_params(rows, F, Dv, *g, sv, wk, st)); /* the last reader of dgl, dh2, dh1 */
    /* the per-variable norms' parameters: the per-row products in dgl (free now), then column sums */
    float *pw = wk.dgl, *pb = wk.dgl + R * P;
    ST_TRY(launch_n(R * P, st, var_ln_prod_kernel, rows, F, Dv, sv, dv, dv_stride, pw, pb));
    ST_TRY(st_cuda_colsum_add(rows, (int)P, pw, (int)P, g->var_ln_w, st));
    ST_TRY(st_cuda_colsum_add(rows, (int)P, pb, (int)P, g->var_ln_b, st));
    ST_TRY(sel_backward(rows, F, C, Dv, c, c_stride, *w, *g, sv, wk, dc, dc_stride, dc_accumulate, st));
    if (ds) ST_TRY(launch_n(R * F, st, embed_ds_kernel, rows, F, Dv, (const float *)wk.dE, w->embed_w, ds, ds_stride));
    /* embed_w[j, :] += dE_j^T s_j (a product per variable), embed_b += colsum(dE) */
    for (int j = 0; j < F; j++)
        ST_TRY(st_cuda_gemm(1, 0, Dv, 1, rows, 1.0f, wk.dE + (size_t)j * Dv, (int)P, s + j, s_stride, 1.0f,
                            g->embed_w + (size_t)j * Dv, 1, st));
    ST_TRY(st_cuda_colsum_add(rows, (int)P, wk.dE, (int)P, g->embed_b, st));
    return ST_OK;
}

extern "C" int st_cuda_vsn_backward(int rows, int F, int C, int Dv, const float *s, int s_stride, const float *c,
                                    int c_stride, const struct st_vsn_weights_f32 *w, const float *saved,
                                    const float *dv, int dv_stride, float *ds, int ds_stride, float *dc, int dc_stride,
                                    int dc_accumulate, const struct st_vsn_grads_f32 *g, float *work, void *stream) {
    return st_cuda_vsn_backward_ex(rows, F, C, Dv, s, s_stride, c, c_stride, w, saved, dv, dv_stride, NULL, 0, ds,
                                   ds_stride, dc, dc_stride, dc_accumulate, g, work, stream);
}
