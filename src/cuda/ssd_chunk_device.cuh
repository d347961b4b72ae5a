/* ssd_chunk_device.cuh: the GPU SSD backward's per-chunk steps, shared by
 * the chunk-parallel chunk_backward_kernel (model/ssd.cu) and the scan
 * backward that walks a (window, head)'s chunks in one block
 * (model/ssd_scan_backward.cu), so that both run the same code and give
 * the same bits: a call's sizes and pointers (ssd_dev_args), the view of
 * one chunk's rows (ssd_chunk, staged or not), chunk_backward's shared
 * memory layout and its steps 2-7 (formulas at the top of model/ssd.cu).
 * CUDA sources only; include after cuda/ssd_device.cuh. */
#ifndef ST_SSD_CHUNK_DEVICE_CUH
#define ST_SSD_CHUNK_DEVICE_CUH

#include <stddef.h>

/* Threads per block of every kernel; chunk_backward's ordered reduction
 * has one slot per thread, so its launches must use exactly this. */
#define SSD_THREADS 256

/* Sizes, strides and pointers of one call, passed to kernels by value. */
struct ssd_dev_args {
    int Bsz, K, H, P, G, N, Q, nc;
    int stage; /* copy the chunk's rows of x, B, C (and dy) into shared memory first */
    int fused; /* (with stage) no state pass: each chunk forms its S_in / dS_out from the chunks' own states */
    const float *x, *dt, *A, *Bm, *Cm, *Dskip, *dy;
    int x_stride, dt_stride, B_stride, C_stride, dy_stride;
    float *y, *dx, *ddt;
    int y_stride, dx_stride, ddt_stride;
};

/* The chunk a block works on: rows t0 .. t0+L-1 of window b, head h, with
 * the head's (or its group's) column offset applied to each row pointer. */
struct ssd_chunk {
    int b, h, c, t0, L;
    size_t bh, row0;
    const float *X, *B, *C, *dt, *dY;
    int xs, bs, cs, dys; /* the row strides of X, B, C, dY (global, or shared once staged) */
    double A, D;
};

/* Chunk c of (window, head) bh = b H + h: a caller that walks a block's
 * chunks knows bh and c without chunk_of's divisions. */
__device__ static inline ssd_chunk chunk_at(const ssd_dev_args &a, size_t bh, int c) {
    ssd_chunk k;
    k.c = c;
    k.bh = bh;
    k.h = (int)(k.bh % (size_t)a.H);
    k.b = (int)(k.bh / (size_t)a.H);
    int g = k.h / (a.H / a.G);
    k.t0 = k.c * a.Q;
    k.L = min(a.Q, a.K - k.t0);
    k.row0 = (size_t)k.b * (size_t)a.K + (size_t)k.t0;
    k.X = a.x + k.row0 * (size_t)a.x_stride + (size_t)k.h * (size_t)a.P;
    k.B = a.Bm + k.row0 * (size_t)a.B_stride + (size_t)g * (size_t)a.N;
    k.C = a.Cm + k.row0 * (size_t)a.C_stride + (size_t)g * (size_t)a.N;
    k.dt = a.dt + k.row0 * (size_t)a.dt_stride + (size_t)k.h;
    k.dY = a.dy ? a.dy + k.row0 * (size_t)a.dy_stride + (size_t)k.h * (size_t)a.P : NULL;
    k.xs = a.x_stride, k.bs = a.B_stride, k.cs = a.C_stride, k.dys = a.dy_stride;
    k.A = (double)a.A[k.h];
    k.D = a.Dskip ? (double)a.Dskip[k.h] : 0.0;
    return k;
}

/* The chunk of block blk of the chunk-parallel kernels (bh nc + c). */
__device__ static inline ssd_chunk chunk_of(const ssd_dev_args &a, int blk) {
    return chunk_at(a, (size_t)(blk / a.nc), blk % a.nc);
}

/* Element accessors of a chunk's rows (local row t). */
__device__ static inline float x_at(const ssd_dev_args &a, const ssd_chunk &k, int t, int p) {
    return (void)a, k.X[(size_t)t * k.xs + p];
}
__device__ static inline float b_at(const ssd_dev_args &a, const ssd_chunk &k, int t, int n) {
    return (void)a, k.B[(size_t)t * k.bs + n];
}
__device__ static inline float c_at(const ssd_dev_args &a, const ssd_chunk &k, int t, int n) {
    return (void)a, k.C[(size_t)t * k.cs + n];
}
__device__ static inline float dy_at(const ssd_dev_args &a, const ssd_chunk &k, int t, int p) {
    return (void)a, k.dY[(size_t)t * k.dys + p];
}

/* a_i = dt_i A and dt_i of the chunk into shared memory. */
__device__ static inline void load_decays(const ssd_dev_args &a, const ssd_chunk &k, double *ai, double *dtv) {
    for (int i = threadIdx.x; i < k.L; i += blockDim.x) {
        dtv[i] = (double)k.dt[(size_t)i * a.dt_stride];
        ai[i] = dtv[i] * k.A;
    }
}

/* With a.stage: the chunk's rows of X and B (and C, dY when asked) into
 * buf (floats: L*P, L*N, L*N, L*P in that order, only those asked), k
 * pointing there afterwards; callers __syncthreads before reading. Every
 * later read of the rows is a shared-memory read instead of a global one
 * (the products read each row L or N times). */
__device__ static inline void stage_chunk(const ssd_dev_args &a, ssd_chunk &k, float *buf, int want_c, int want_dy) {
    if (!a.stage) return;
    k.X = stage_rows(k.X, k.xs, k.L, a.P, buf), k.xs = a.P + 1, buf += (size_t)a.Q * (a.P + 1);
    k.B = stage_rows(k.B, k.bs, k.L, a.N, buf), k.bs = a.N + 1, buf += (size_t)a.Q * (a.N + 1);
    if (want_c) k.C = stage_rows(k.C, k.cs, k.L, a.N, buf), k.cs = a.N + 1, buf += (size_t)a.Q * (a.N + 1);
    if (want_dy) k.dY = stage_rows(k.dY, k.dys, k.L, a.P, buf), k.dys = a.P + 1;
}

/* Floats stage_chunk needs (states: that many P x N states more, padded
 * as the rows, that the caller stages after them). */
static inline size_t stage_floats(int Q, int P, int N, int want_c, int want_dy, int states = 0) {
    return (size_t)Q * ((size_t)(P + 1) * (1 + want_dy) + (size_t)(N + 1) * (1 + want_c)) +
           (size_t)states * (size_t)P * (N + 1);
}

/* Where stage_chunk's rows end in buf. */
__device__ static inline float *stage_end(const ssd_dev_args &a, float *buf, int want_c, int want_dy) {
    return buf + (size_t)a.Q * ((size_t)(a.P + 1) * (1 + want_dy) + (size_t)(a.N + 1) * (1 + want_c));
}

/* Shared memory of chunk_backward: the doubles first (8-byte aligned). */
struct ssd_bwd_smem {
    double *ai, *dtv, *e, *last, *dd, *de, *sa, *red;
    float *xds, *dys; /* [L, N]: (X dS_out)[i, n] and (dY S_in)[i, n] */
    float *G, *Lm, *dM, *stage;
};

__device__ static inline ssd_bwd_smem bwd_smem(double *base, int Q, int N) {
    ssd_bwd_smem m;
    m.ai = base;
    m.dtv = m.ai + Q;
    m.e = m.dtv + Q;
    m.last = m.e + Q;
    m.dd = m.last + Q;
    m.de = m.dd + Q;
    m.sa = m.de + Q;
    m.red = m.sa + Q;
    m.xds = (float *)(m.red + SSD_THREADS);
    m.dys = m.xds + (size_t)Q * N;
    m.G = m.dys + (size_t)Q * N;
    m.Lm = m.G + (size_t)Q * Q;
    m.dM = m.Lm + (size_t)Q * Q;
    m.stage = m.dM + (size_t)Q * Q;
    return m;
}

/* Shared bytes of chunk_backward (and the scan backward), with (stage) or
 * without the staged rows and the two boundary states. */
static inline size_t bwd_smem_bytes(int Q, int P, int N, int stage) {
    return sizeof(double) * (7 * (size_t)Q + SSD_THREADS) +
           sizeof(float) *
               (2 * (size_t)Q * N + 3 * (size_t)Q * (size_t)Q + (stage ? stage_floats(Q, P, N, 1, 1, 2) : 0));
}

/* Step 2 of chunk_backward: decays, e, last row, and for s <= t
 * G = C_t.B_s, Lm, dM = dY_t.X_s (all 0 above the diagonal). */
__device__ static inline void bwd_products(const ssd_dev_args &a, const ssd_chunk &k, ssd_bwd_smem &m) {
    const int L = k.L;
    for (int i = threadIdx.x; i < L; i += blockDim.x) {
        m.e[i] = exp(prefix(m.ai, i));
        m.last[i] = exp(segment(m.ai, L - 1, i));
        m.de[i] = 0;
    }
    /* 2 x 2 tiles (rows t, t+1; columns s, s+1) on or below the diagonal,
     * each dot product summed in order as one element's would be; tiles
     * wholly above it are never read by the later steps and not written */
    const int l2 = (L + 1) / 2;
    for (int idx = threadIdx.x; idx < l2 * l2; idx += blockDim.x) {
        const int ti = idx / l2, si = idx % l2;
        if (si > ti) continue;
        const int t0 = 2 * ti, s0 = 2 * si, t1 = min(t0 + 1, L - 1), s1 = min(s0 + 1, L - 1);
        float g00 = 0, g01 = 0, g10 = 0, g11 = 0, d00 = 0, d01 = 0, d10 = 0, d11 = 0;
        for (int n = 0; n < a.N; n++) {
            const float c0 = c_at(a, k, t0, n), c1 = c_at(a, k, t1, n), b0 = b_at(a, k, s0, n), b1 = b_at(a, k, s1, n);
            g00 += c0 * b0, g01 += c0 * b1, g10 += c1 * b0, g11 += c1 * b1;
        }
        for (int p = 0; p < a.P; p++) {
            const float y0 = dy_at(a, k, t0, p), y1 = dy_at(a, k, t1, p), x0 = x_at(a, k, s0, p),
                        x1 = x_at(a, k, s1, p);
            d00 += y0 * x0, d01 += y0 * x1, d10 += y1 * x0, d11 += y1 * x1;
        }
        const float g[2][2] = {{g00, g01}, {g10, g11}}, d[2][2] = {{d00, d01}, {d10, d11}};
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                const int t = t0 + i, s = s0 + j, at = t * L + s;
                if (t >= L || s >= L) continue;
                const int on = s <= t;
                m.G[at] = on ? g[i][j] : 0.0f;
                m.Lm[at] = on ? (float)exp(segment(m.ai, t, s)) : 0.0f;
                m.dM[at] = on ? d[i][j] : 0.0f;
            }
    }
}

/* Step 3, one thread per column s (ssd.c's chunk_intra_grads): G becomes M,
 * dM becomes dG = dM o Lm o dt_s, Lm becomes R = dM o G o Lm o dt_s below
 * the diagonal (0 on it), dd[s] = sum_t dM o G o Lm (ddt's direct part). */
__device__ static inline void bwd_intra(const ssd_chunk &k, ssd_bwd_smem &m) {
    const int L = k.L;
    for (int s = threadIdx.x; s < L; s += blockDim.x) {
        double dts = m.dtv[s], acc = 0;
        for (int t = s; t < L; t++) {
            int i = t * L + s;
            double g = m.G[i], l = m.Lm[i], d = m.dM[i], q = d * g * l;
            acc += q;
            m.G[i] = (float)(g * l * dts);
            m.dM[i] = (float)(d * l * dts);
            m.Lm[i] = t > s ? (float)(q * dts) : 0.0f;
        }
        m.dd[s] = acc;
    }
}

/* Step 4: the terms of S_out through w_i (into dd[i] and R's last row)
 * and of Y's S_in term (de[i]); row L-1 also takes S_out's decay of S_in,
 * sum(dS_out o S_in). First a thread per (i, n) forms xds = X dS_out and
 * dys = dY S_in (kept for step 7), then a thread per row i. */
__device__ static inline void bwd_boundary(const ssd_dev_args &a, const ssd_chunk &k, ssd_bwd_smem &m, const float *Sin,
                                           int sin_ld, const float *dSo, int dso_ld) {
    const int L = k.L, has_in = k.c > 0, has_out = k.c + 1 < a.nc;
    const size_t pn = (size_t)a.P * (size_t)a.N;
    /* 2 x 2 tiles: rows i, i + 1 and columns n0, n1 = n0 + n2 (consecutive
     * threads, consecutive n), each sum over p in order */
    const int i2 = (L + 1) / 2, n2 = (a.N + 1) / 2;
    for (int idx = threadIdx.x; idx < i2 * n2; idx += blockDim.x) {
        const int i0 = 2 * (idx / n2), n0 = idx % n2, n1 = n0 + n2;
        const int i1 = min(i0 + 1, L - 1), m1 = min(n1, a.N - 1);
        float x00 = 0, x01 = 0, x10 = 0, x11 = 0, y00 = 0, y01 = 0, y10 = 0, y11 = 0;
        for (int p = 0; p < a.P; p++) {
            if (has_out) {
                const float u0 = x_at(a, k, i0, p), u1 = x_at(a, k, i1, p);
                const float v0 = dSo[(size_t)p * dso_ld + n0], v1 = dSo[(size_t)p * dso_ld + m1];
                x00 += u0 * v0, x01 += u0 * v1, x10 += u1 * v0, x11 += u1 * v1;
            }
            if (has_in) {
                const float u0 = dy_at(a, k, i0, p), u1 = dy_at(a, k, i1, p);
                const float v0 = Sin[(size_t)p * sin_ld + n0], v1 = Sin[(size_t)p * sin_ld + m1];
                y00 += u0 * v0, y01 += u0 * v1, y10 += u1 * v0, y11 += u1 * v1;
            }
        }
        const size_t r0 = (size_t)i0 * a.N, r1 = (size_t)i1 * a.N;
        m.xds[r0 + n0] = x00, m.dys[r0 + n0] = y00;
        if (n1 < a.N) m.xds[r0 + n1] = x01, m.dys[r0 + n1] = y01;
        if (i1 > i0) {
            m.xds[r1 + n0] = x10, m.dys[r1 + n0] = y10;
            if (n1 < a.N) m.xds[r1 + n1] = x11, m.dys[r1 + n1] = y11;
        }
    }
    double ddc = 0; /* this thread's share of sum(dS_out o S_in), into red */
    if (has_in && has_out)
        for (size_t j = threadIdx.x; j < pn; j += blockDim.x)
            ddc += (double)dSo[(j / a.N) * dso_ld + j % a.N] * (double)Sin[(j / a.N) * sin_ld + j % a.N];
    m.red[threadIdx.x] = ddc;
    __syncthreads();
    for (int i = threadIdx.x; i < L; i += blockDim.x) {
        if (has_out) { /* dw_i = B_i . (X dS_out)_i */
            double dw = 0;
            for (int n = 0; n < a.N; n++)
                dw += (double)b_at(a, k, i, n) * m.xds[(size_t)i * a.N + n];
            m.dd[i] += dw * m.last[i];
            if (i < L - 1) {
                float *r = &m.Lm[(L - 1) * L + i];
                *r = (float)((double)*r + dw * m.last[i] * m.dtv[i]);
            }
        }
        if (has_in) { /* de_i = C_i . (dY S_in)_i */
            double de = 0;
            for (int n = 0; n < a.N; n++)
                de += (double)c_at(a, k, i, n) * m.dys[(size_t)i * a.N + n];
            if (i == L - 1 && has_out)
                for (int j = 0; j < SSD_THREADS; j++)
                    de += m.red[j];
            m.de[i] = de;
        }
    }
}

/* Step 5, one thread per row t: R's row becomes its exclusive prefix sums
 * seeded by e[t] de[t], so that da_i = sum_{t>=i} R[t,i]. */
__device__ static inline void bwd_prefix_rows(const ssd_chunk &k, ssd_bwd_smem &m) {
    const int L = k.L, has_in = k.c > 0;
    for (int t = threadIdx.x; t < L; t += blockDim.x) {
        float *Rt = m.Lm + t * L;
        double acc = has_in ? m.e[t] * m.de[t] : 0.0;
        for (int s = 0; s <= t; s++) {
            double here = s < t ? (double)Rt[s] : 0.0;
            Rt[s] = (float)acc;
            acc += here;
        }
    }
}

/* A chunk's backward up to its prefix rows, as both backward kernels run
 * it, with the barriers between the steps: the decays, the products, the
 * intra-chunk terms, the boundary terms (S_in and dS_out at row strides
 * sin_ld, dso_ld), the prefix rows. The caller synchronises after. */
__device__ static inline void bwd_steps(const ssd_dev_args &a, const ssd_chunk &k, ssd_bwd_smem &m, const float *Sin,
                                        int sin_ld, const float *dSo, int dso_ld) {
    load_decays(a, k, m.ai, m.dtv);
    __syncthreads();
    bwd_products(a, k, m);
    __syncthreads();
    bwd_intra(k, m);
    __syncthreads();
    bwd_boundary(a, k, m, Sin, sin_ld, dSo, dso_ld);
    __syncthreads();
    bwd_prefix_rows(k, m);
}
/* Step 6: ddt_i = direct_i + A da_i; sa[i] = dt_i da_i (for dA); each
 * thread's share of sum dY o X (for dD) into red[tid]. */
__device__ static inline void bwd_decay_grads(const ssd_dev_args &a, const ssd_chunk &k, ssd_bwd_smem &m) {
    const int L = k.L;
    for (int i = threadIdx.x; i < L; i += blockDim.x) {
        double da = 0;
        for (int t = i; t < L; t++)
            da += (double)m.Lm[t * L + i];
        a.ddt[(k.row0 + (size_t)i) * (size_t)a.ddt_stride + (size_t)k.h] = (float)(m.dd[i] + k.A * da);
        m.sa[i] = m.dtv[i] * da;
    }
    double pd = 0;
    for (int idx = threadIdx.x; idx < L * a.P; idx += blockDim.x) {
        int t = idx / a.P, p = idx % a.P;
        pd += (double)dy_at(a, k, t, p) * (double)x_at(a, k, t, p);
    }
    m.red[threadIdx.x] = pd;
}

/* The chunk's dA and dD partials (for reduce_head): thread 0 sums sa[] and
 * red[] in a fixed order after step 6. */
__device__ static inline void bwd_partials(const ssd_chunk &k, const ssd_bwd_smem &m, float *partA, float *partD,
                                           size_t at) {
    if (threadIdx.x == 0) {
        double sA = 0, sD = 0;
        for (int i = 0; i < k.L; i++)
            sA += m.sa[i];
        for (int j = 0; j < SSD_THREADS; j++)
            sD += m.red[j];
        partA[at] = (float)sA;
        partD[at] = (float)sD;
    }
}

/* Step 7: dX = M^T dY + diag(w) B dS_out^T + D dY (written to dx), and this
 * head's dC = dG B + diag(e) dY S_in, dB = dG^T C + diag(w) X dS_out (to
 * its slab of dBp/dCp). G holds M and dM holds dG since step 3. */
__device__ static inline void bwd_outputs(const ssd_dev_args &a, const ssd_chunk &k, const ssd_bwd_smem &m,
                                          const float *dSo, int dso_ld, float *dBh, float *dCh) {
    const int L = k.L, has_in = k.c > 0, has_out = k.c + 1 < a.nc;
    /* dX in 2 x 2 tiles: rows s0, s1 = s0 + 1 and columns p0, p1 = p0 + p2;
     * row s0's sum over t >= s0 takes its t = s0 term first, then the terms
     * both rows share, in order as one element's sum would */
    const int l2 = (L + 1) / 2, p2 = (a.P + 1) / 2, n2 = (a.N + 1) / 2;
    for (int idx = threadIdx.x; idx < l2 * p2; idx += blockDim.x) {
        const int s0 = 2 * (idx / p2), p0 = idx % p2, p1 = p0 + p2;
        const int s1 = min(s0 + 1, L - 1), q1 = min(p1, a.P - 1);
        float a00 = m.G[s0 * L + s0] * dy_at(a, k, s0, p0), a01 = m.G[s0 * L + s0] * dy_at(a, k, s0, q1);
        float a10 = 0, a11 = 0;
        for (int t = s0 + 1; t < L; t++) {
            const float y0 = dy_at(a, k, t, p0), y1 = dy_at(a, k, t, q1), g0 = m.G[t * L + s0], g1 = m.G[t * L + s1];
            a00 += g0 * y0, a01 += g0 * y1, a10 += g1 * y0, a11 += g1 * y1;
        }
        if (has_out) {
            float d00 = 0, d01 = 0, d10 = 0, d11 = 0;
            for (int n = 0; n < a.N; n++) {
                const float b0 = b_at(a, k, s0, n), b1 = b_at(a, k, s1, n);
                const float v0 = dSo[(size_t)p0 * dso_ld + n], v1 = dSo[(size_t)q1 * dso_ld + n];
                d00 += b0 * v0, d01 += b0 * v1, d10 += b1 * v0, d11 += b1 * v1;
            }
            const float w0 = (float)(m.last[s0] * m.dtv[s0]), w1 = (float)(m.last[s1] * m.dtv[s1]);
            a00 += w0 * d00, a01 += w0 * d01, a10 += w1 * d10, a11 += w1 * d11;
        }
        const float D = (float)k.D;
        a00 += D * dy_at(a, k, s0, p0), a01 += D * dy_at(a, k, s0, q1);
        a10 += D * dy_at(a, k, s1, p0), a11 += D * dy_at(a, k, s1, q1);
        float *r0 = a.dx + (k.row0 + (size_t)s0) * (size_t)a.dx_stride + (size_t)k.h * (size_t)a.P;
        float *r1 = a.dx + (k.row0 + (size_t)s1) * (size_t)a.dx_stride + (size_t)k.h * (size_t)a.P;
        r0[p0] = a00;
        if (p1 < a.P) r0[p1] = a01;
        if (s1 > s0) {
            r1[p0] = a10;
            if (p1 < a.P) r1[p1] = a11;
        }
    }
    /* dC, dB in 2 x 2 tiles: rows t0, t1 = t0 + 1 and columns n0, n1 = n0 +
     * n2. dC's row t sums s = 0 .. t (row t1's last term s = t1 after the
     * shared ones); dB's row t sums u = t .. L-1 (row t0's first term u = t0
     * before the shared ones): each in order as one element's sum would. */
    for (int idx = threadIdx.x; idx < l2 * n2; idx += blockDim.x) {
        const int t0 = 2 * (idx / n2), n0 = idx % n2, n1 = n0 + n2;
        const int t1 = min(t0 + 1, L - 1), m1 = min(n1, a.N - 1);
        float c00 = 0, c01 = 0, c10 = 0, c11 = 0;
        for (int s = 0; s <= t0; s++) {
            const float u0 = m.dM[t0 * L + s], u1 = m.dM[t1 * L + s], b0 = b_at(a, k, s, n0), b1 = b_at(a, k, s, m1);
            c00 += u0 * b0, c01 += u0 * b1, c10 += u1 * b0, c11 += u1 * b1;
        }
        if (t1 > t0) {
            const float u1 = m.dM[t1 * L + t1];
            c10 += u1 * b_at(a, k, t1, n0), c11 += u1 * b_at(a, k, t1, m1);
        }
        float b00 = m.dM[t0 * L + t0] * c_at(a, k, t0, n0), b01 = m.dM[t0 * L + t0] * c_at(a, k, t0, m1);
        float b10 = 0, b11 = 0;
        for (int u = t0 + 1; u < L; u++) { /* rows t0, t1 as the s index of dB */
            const float v0 = m.dM[u * L + t0], v1 = m.dM[u * L + t1], e0 = c_at(a, k, u, n0), e1 = c_at(a, k, u, m1);
            b00 += v0 * e0, b01 += v0 * e1, b10 += v1 * e0, b11 += v1 * e1;
        }
        if (has_in) {
            const float e0 = (float)m.e[t0], e1 = (float)m.e[t1];
            c00 += e0 * m.dys[(size_t)t0 * a.N + n0], c01 += e0 * m.dys[(size_t)t0 * a.N + m1];
            c10 += e1 * m.dys[(size_t)t1 * a.N + n0], c11 += e1 * m.dys[(size_t)t1 * a.N + m1];
        }
        if (has_out) {
            const float w0 = (float)(m.last[t0] * m.dtv[t0]), w1 = (float)(m.last[t1] * m.dtv[t1]);
            b00 += w0 * m.xds[(size_t)t0 * a.N + n0], b01 += w0 * m.xds[(size_t)t0 * a.N + m1];
            b10 += w1 * m.xds[(size_t)t1 * a.N + n0], b11 += w1 * m.xds[(size_t)t1 * a.N + m1];
        }
        const size_t o0 = (size_t)(k.t0 + t0) * (size_t)a.N, o1 = (size_t)(k.t0 + t1) * (size_t)a.N;
        dCh[o0 + n0] = c00, dBh[o0 + n0] = b00;
        if (n1 < a.N) dCh[o0 + n1] = c01, dBh[o0 + n1] = b01;
        if (t1 > t0) {
            dCh[o1 + n0] = c10, dBh[o1 + n0] = b10;
            if (n1 < a.N) dCh[o1 + n1] = c11, dBh[o1 + n1] = b11;
        }
    }
}

#endif
