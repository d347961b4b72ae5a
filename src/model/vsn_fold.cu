/* vsn_fold.cu: the VSN's embedding folded into the three linears that read
 * it, on the GPU (the math and the API: cuda/vsn_fold_cuda.h). The folds
 * and their backward are small (a few F x P values, made from the weights
 * each step: a warp per folded value, a thread per backward output, sums
 * in double in a fixed order); the
 * row-sized kernels here are element-wise (the rank-one fc1, the products
 * with s for the column sums) or a warp per (row, variable) (ds). */
#include "cuda/check.h"
#include "cuda/vsn_device.cuh"

extern "C" {
#include "cuda/vsn_fold_cuda.h"
#include "model/vsn.h"
}

#define FOLD_THREADS 256

#define FOLD_TAKE(field, n) (l.field = base ? base + o : NULL, o += (n))

/* The layouts carve from base (NULL: only count) and say their size in *total. */
static st_vsn_fold fold_layout(float *base, int F, int Dv, size_t *total) {
    size_t P = (size_t)F * Dv, Hs = (size_t)hidden_sel(F, Dv), o = 0;
    st_vsn_fold l;
    FOLD_TAKE(U, P);
    FOLD_TAKE(V, P);
    FOLD_TAKE(T1, Hs * F);
    FOLD_TAKE(c1, Hs);
    FOLD_TAKE(Tk, (size_t)F * F);
    FOLD_TAKE(ck, (size_t)F);
    FOLD_TAKE(Vg, 2 * P);
    *total = o;
    return l;
}

static st_vsn_fold_grads fold_grads_layout(float *base, int F, int Dv, size_t *total) {
    size_t P = (size_t)F * Dv, Hs = (size_t)hidden_sel(F, Dv), o = 0;
    st_vsn_fold_grads l;
    FOLD_TAKE(G, (size_t)F * Hs);
    FOLD_TAKE(gs, Hs);
    FOLD_TAKE(Gk, (size_t)F * F);
    FOLD_TAKE(gk, (size_t)F);
    FOLD_TAKE(Q, P);
    FOLD_TAKE(Sx, P);
    FOLD_TAKE(q, P);
    FOLD_TAKE(X, P);
    FOLD_TAKE(gg, 2 * P);
    *total = o;
    return l;
}
#undef FOLD_TAKE

extern "C" st_vsn_fold st_vsn_fold_at(float *base, int F, int Dv) {
    size_t total;
    return fold_layout(base, F, Dv, &total);
}

extern "C" st_vsn_fold_grads st_vsn_fold_grads_at(float *base, int F, int Dv) {
    size_t total;
    return fold_grads_layout(base, F, Dv, &total);
}

extern "C" size_t st_vsn_fold_count(int F, int Dv) {
    size_t total;
    fold_layout(NULL, F, Dv, &total);
    return total;
}

extern "C" size_t st_vsn_fold_grads_count(int F, int Dv) {
    size_t total;
    fold_grads_layout(NULL, F, Dv, &total);
    return total;
}

static unsigned blocks_for(size_t n) {
    size_t b = (n + FOLD_THREADS - 1) / FOLD_THREADS;
    return (unsigned)(b > (1u << 30) ? (1u << 30) : b);
}

/* ---- the folds ----------------------------------------------------------- */

/* Folded value t of [U | V | T1 | c1 | Tk | ck | Vg]: the dot of a weight
 * row (or row segment) with an embedding vector, plus a bias (NULL: none),
 * into *out. */
struct fold_item {
    const float *row, *vec, *bias;
    int len;
    float *out;
};

__device__ static fold_item fold_item_of(size_t t, int F, int Dv, const st_vsn_weights_f32 &w, const st_vsn_fold &f) {
    const int P = F * Dv, Hs = hidden_sel(F, Dv);
    fold_item it;
    it.len = Dv, it.bias = NULL;
    if (t < (size_t)2 * P) { /* U[j, o] = W1_j[o, :] . ew_j;  V[j, o] = W1_j[o, :] . eb_j + b1_j[o] */
        const int bias = t >= (size_t)P, jo = (int)(t % P), j = jo / Dv, o = jo % Dv;
        it.row = w.var_fc1_w + ((size_t)j * Dv + o) * Dv, it.vec = (bias ? w.embed_b : w.embed_w) + j * Dv;
        it.bias = bias ? w.var_fc1_b + jo : NULL, it.out = (bias ? f.V : f.U) + jo;
        return it;
    }
    t -= (size_t)2 * P;
    const size_t nsel = (size_t)Hs * F + Hs, nskip = (size_t)F * F + F;
    if (t >= nsel + nskip) { /* Vg[j, o] = Wg_j[o, :] . b2_j + bg_j[o] */
        const int jo = (int)(t - nsel - nskip), j = jo / (2 * Dv), o = jo % (2 * Dv);
        it.row = w.var_glu_w + ((size_t)j * 2 * Dv + o) * Dv, it.vec = w.var_fc2_b + j * Dv;
        it.bias = w.var_glu_b + jo, it.out = f.Vg + jo;
        return it;
    }
    /* the selection fc1 (out = Hs) then the skip (out = F): T[o, j] = W[o, j's Dv] . ew_j,
     * c[o] = W[o, :] . eb + b[o] */
    const float *W = w.sel_fc1_w, *b = w.sel_fc1_b;
    float *T = f.T1, *c = f.c1;
    int out = Hs;
    if (t >= nsel) {
        t -= nsel;
        W = w.sel_skip_w, b = w.sel_skip_b, T = f.Tk, c = f.ck, out = F;
    }
    if (t < (size_t)out * F) {
        const int o = (int)(t / F), j = (int)(t % F);
        it.row = W + (size_t)o * P + (size_t)j * Dv, it.vec = w.embed_w + j * Dv, it.out = T + t;
    } else {
        const int o = (int)(t - (size_t)out * F);
        it.row = W + (size_t)o * P, it.vec = w.embed_b, it.len = P, it.bias = b + o, it.out = c + o;
    }
    return it;
}

/* A warp per folded value: lane l sums the products k = l, l + 32, ... in
 * double, warp_sum adds the lanes (a fixed butterfly), lane 0 adds the bias
 * and rounds once. (A thread per value walked c1's and ck's P = F Dv =
 * 1,280 products serially: 106 us a call at the default preset, H200.) */
static __global__ void fold_kernel(int F, int Dv, size_t n, st_vsn_weights_f32 w, st_vsn_fold f) {
    const int lane = threadIdx.x % 32;
    WARP_LOOP(t, n) {
        const fold_item it = fold_item_of(t, F, Dv, w, f);
        double acc = 0;
        for (int k = lane; k < it.len; k += 32)
            acc += (double)it.row[k] * (double)it.vec[k];
        acc = warp_sum(acc);
        if (lane == 0) *it.out = (float)(it.bias ? acc + (double)*it.bias : acc);
    }
}

extern "C" int st_cuda_vsn_fold(int F, int Dv, const struct st_vsn_weights_f32 *w, const st_vsn_fold *f, void *stream) {
    size_t n = st_vsn_fold_count(F, Dv);
    fold_kernel<<<blocks_for(n * 32), FOLD_THREADS, 0, (cudaStream_t)stream>>>(F, Dv, n, *w, *f);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

extern "C" int st_cuda_vsn_fold_grads_zero(int F, int Dv, const st_vsn_fold_grads *r, void *stream) {
    ST_CUDA_TRY(cudaMemsetAsync(r->G, 0, sizeof(float) * st_vsn_fold_grads_count(F, Dv), (cudaStream_t)stream));
    return ST_OK;
}

/* ---- row-sized kernels ---------------------------------------------------- */

/* The row-sized kernels run on a 2-D grid, x over the P columns, y over
 * the rows: no 64-bit division per element (a flat index cut into row and
 * column that way ran at 0.7 TB/s, ncu). */
static dim3 grid_rows_cols(int rows, int P) {
    unsigned y = rows < 65535 ? (unsigned)rows : 65535u;
    return dim3((unsigned)((P + FOLD_THREADS - 1) / FOLD_THREADS), y > 0 ? y : 1);
}

static __global__ void rank1_kernel(int rows, int F, int Dv, const float *s, int s_stride, const float *U,
                                    const float *V, int elu, float *out, int out_stride) {
    const int jk = blockIdx.x * blockDim.x + threadIdx.x, j = jk / Dv;
    if (jk >= F * Dv) return;
    const float u = U[jk], c = V[jk];
    for (size_t r = blockIdx.y; r < (size_t)rows; r += gridDim.y) {
        float v = s[r * (size_t)s_stride + j] * u + c;
        out[r * (size_t)out_stride + jk] = elu ? dev_elu(v) : v;
    }
}

extern "C" int st_cuda_vsn_rank1(int rows, int F, int Dv, const float *s, int s_stride, const float *U, const float *V,
                                 int elu, float *out, int out_stride, void *stream) {
    size_t n = (size_t)rows * F * Dv;
    if (n == 0) return ST_OK;
    rank1_kernel<<<grid_rows_cols(rows, F * Dv), FOLD_THREADS, 0, (cudaStream_t)stream>>>(rows, F, Dv, s, s_stride, U,
                                                                                          V, elu, out, out_stride);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

static __global__ void scale2_kernel(int rows, int F, int Dv, const float *s, int s_stride, const float *a,
                                     int a_stride, const float *b, int b_stride, float *out) {
    const size_t P = (size_t)F * Dv;
    const int jk = blockIdx.x * blockDim.x + threadIdx.x, j = jk / Dv;
    if (jk >= F * Dv) return;
    for (size_t r = blockIdx.y; r < (size_t)rows; r += gridDim.y) {
        float sj = s[r * (size_t)s_stride + j];
        out[r * 2 * P + jk] = sj * a[r * (size_t)a_stride + jk];
        out[r * 2 * P + P + jk] = sj * b[r * (size_t)b_stride + jk];
    }
}

extern "C" int st_cuda_vsn_scale2(int rows, int F, int Dv, const float *s, int s_stride, const float *a, int a_stride,
                                  const float *b, int b_stride, float *out, void *stream) {
    size_t n = (size_t)rows * F * Dv;
    if (n == 0) return ST_OK;
    scale2_kernel<<<grid_rows_cols(rows, F * Dv), FOLD_THREADS, 0, (cudaStream_t)stream>>>(rows, F, Dv, s, s_stride, a,
                                                                                           a_stride, b, b_stride, out);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

/* ---- the backward of the folds -------------------------------------------- */

/* One thread per gradient value, over [sel_fc1_w | sel_fc1_b | sel_skip_w |
 * sel_skip_b | var_fc1_w | var_fc1_b | embed_w | embed_b]:
 *   dW[o, jk]   += Gr[j, o] ew[jk] + gr[o] eb[jk]    (the selection linears, Gr = G or Gk)
 *   dW1_j[o, k] += Q[jo] ew[jk] + q[jo] eb[jk];  db1 += q;  dbsel += gs, gk
 *   dew[jk]     += Sx[jk] + W1_j[:, k] . Q_j + Wsel1[:, jk] . G[j, :] + Wskip[:, jk] . Gk[j, :]
 *   deb[jk]     += X[jk]  + W1_j[:, k] . q_j + Wsel1[:, jk] . gs      + Wskip[:, jk] . gk
 * then [var_glu_w | var_glu_b]: dWg_j[o, k] += gg[jo] b2[jk];  dbg += gg. */
/* Gradient values fold_backward_kernel writes (its index space). */
static __host__ __device__ size_t fold_backward_count(int F, int Dv) {
    const size_t P = (size_t)F * Dv, Hs = (size_t)hidden_sel(F, Dv);
    return Hs * P + Hs + (size_t)F * P + F + (size_t)F * Dv * Dv + P + 2 * P + (size_t)F * 2 * Dv * Dv + 2 * P;
}

static __global__ void fold_backward_kernel(int F, int Dv, st_vsn_weights_f32 w, st_vsn_fold_grads r,
                                            st_vsn_grads_f32 g) {
    const int P = F * Dv, Hs = hidden_sel(F, Dv);
    const size_t nsel = (size_t)Hs * P + Hs, nskip = (size_t)F * P + F;
    const size_t nglu = (size_t)F * 2 * Dv * Dv + 2 * (size_t)P, n = fold_backward_count(F, Dv);
    GRID_LOOP(i, n) {
        size_t t = i;
        if (t >= n - nglu) {
            t -= n - nglu;
            if (t < (size_t)F * 2 * Dv * Dv) {
                size_t jo = t / Dv;
                int k = (int)(t % Dv), j = (int)(jo / (2 * Dv));
                g.var_glu_w[t] = (float)((double)g.var_glu_w[t] + (double)r.gg[jo] * w.var_fc2_b[j * Dv + k]);
            } else {
                t -= (size_t)F * 2 * Dv * Dv;
                g.var_glu_b[t] = (float)((double)g.var_glu_b[t] + r.gg[t]);
            }
            continue;
        }
        if (t < nsel + nskip) {
            const float *Gr = r.G, *gr = r.gs;
            float *dW = g.sel_fc1_w, *db = g.sel_fc1_b;
            int out = Hs;
            if (t >= nsel) t -= nsel, Gr = r.Gk, gr = r.gk, dW = g.sel_skip_w, db = g.sel_skip_b, out = F;
            if (t < (size_t)out * P) {
                int o = (int)(t / P), jk = (int)(t % P), j = jk / Dv;
                double d = (double)Gr[(size_t)j * out + o] * w.embed_w[jk] + (double)gr[o] * w.embed_b[jk];
                dW[t] = (float)((double)dW[t] + d);
            } else {
                int o = (int)(t - (size_t)out * P);
                db[o] = (float)((double)db[o] + gr[o]);
            }
            continue;
        }
        t -= nsel + nskip;
        if (t < (size_t)F * Dv * Dv) { /* var_fc1_w[j][o][k] */
            int j = (int)(t / ((size_t)Dv * Dv)), o = (int)(t / Dv % Dv), k = (int)(t % Dv);
            int jo = j * Dv + o, jk = j * Dv + k;
            double d = (double)r.Q[jo] * w.embed_w[jk] + (double)r.q[jo] * w.embed_b[jk];
            g.var_fc1_w[t] = (float)((double)g.var_fc1_w[t] + d);
            continue;
        }
        t -= (size_t)F * Dv * Dv;
        if (t < (size_t)P) {
            g.var_fc1_b[t] = (float)((double)g.var_fc1_b[t] + r.q[t]);
            continue;
        }
        t -= P;
        /* embed_w (weighted by s: Sx, Q, G, Gk), then embed_b (unweighted: X, q, gs, gk) */
        int bias = t >= (size_t)P, jk = (int)(t % P), j = jk / Dv, k = jk % Dv;
        const float *own = bias ? r.X : r.Sx, *var = (bias ? r.q : r.Q) + j * Dv;
        const float *sel = bias ? r.gs : r.G + (size_t)j * Hs, *skip = bias ? r.gk : r.Gk + (size_t)j * F;
        double d = own[jk];
        for (int o = 0; o < Dv; o++)
            d += (double)w.var_fc1_w[((size_t)j * Dv + o) * Dv + k] * var[o];
        for (int h = 0; h < Hs; h++)
            d += (double)w.sel_fc1_w[(size_t)h * P + jk] * sel[h];
        for (int o = 0; o < F; o++)
            d += (double)w.sel_skip_w[(size_t)o * P + jk] * skip[o];
        float *dst = bias ? g.embed_b : g.embed_w;
        dst[jk] = (float)((double)dst[jk] + d);
    }
}

extern "C" int st_cuda_vsn_fold_backward(int F, int Dv, const struct st_vsn_weights_f32 *w, const st_vsn_fold_grads *r,
                                         const struct st_vsn_grads_f32 *g, void *stream) {
    fold_backward_kernel<<<blocks_for(fold_backward_count(F, Dv)), FOLD_THREADS, 0, (cudaStream_t)stream>>>(F, Dv, *w,
                                                                                                            *r, *g);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

/* A warp per (row r, variable j) (j fastest); the lanes walk k, h and i. */
static __global__ void fold_ds_kernel(int rows, int F, int Dv, st_vsn_weights_f32 w, st_vsn_fold f, const float *dx,
                                      const float *dh1, const float *dh1s, const float *dxs, float *ds, int ds_stride) {
    const size_t P = (size_t)F * Dv;
    const int Hs = hidden_sel(F, Dv), lane = threadIdx.x & 31;
    WARP_LOOP(it, (size_t)rows * F) {
        size_t r = it / (size_t)F;
        int j = (int)(it % (size_t)F);
        size_t col = (size_t)j * Dv;
        double acc = 0;
        for (int k = lane; k < Dv; k += 32)
            acc += (double)dx[r * P + col + k] * w.embed_w[col + k] + (double)dh1[r * P + col + k] * f.U[col + k];
        for (int h = lane; h < Hs; h += 32)
            acc += (double)dh1s[r * Hs + h] * f.T1[(size_t)h * F + j];
        for (int i = lane; i < F; i += 32)
            acc += (double)dxs[r * F + i] * f.Tk[(size_t)i * F + j];
        acc = warp_sum(acc);
        if (lane == 0) ds[r * (size_t)ds_stride + j] = (float)acc;
    }
}

extern "C" int st_cuda_vsn_fold_ds(int rows, int F, int Dv, const struct st_vsn_weights_f32 *w, const st_vsn_fold *f,
                                   const float *dx, const float *dh1, const float *dh1s, const float *dxs, float *ds,
                                   int ds_stride, void *stream) {
    size_t warps = (size_t)rows * F;
    if (warps == 0) return ST_OK;
    fold_ds_kernel<<<blocks_for(warps * 32), FOLD_THREADS, 0, (cudaStream_t)stream>>>(rows, F, Dv, *w, *f, dx, dh1,
                                                                                      dh1s, dxs, ds, ds_stride);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}
