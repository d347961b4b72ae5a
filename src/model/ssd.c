/* ssd.c: the Mamba2 SSD scan on the CPU: the sequential recurrence (the
 * definition and test oracle) and the chunked algorithm, forward and backward.
 *
 * Per (b, h), with a_t = dt_t A (<= 0), S_{-1} = 0 (S is P x N):
 *     S_t = exp(a_t) S_{t-1} + dt_t x_t B_t^T,    y_t = S_t C_t + D x_t
 * Chunked (chunk length Q, the last chunk may be shorter): inside a chunk of
 * length L starting at t0, with local t, s in [0, L),
 *     Lm[t,s] = exp(sum_{s<i<=t} a_i) for s <= t, else 0   (intra-chunk decay)
 *     e[t]    = exp(sum_{i<=t} a_i)                        (decay from entry)
 *     M       = (C B^T) o Lm o dt_s                        ([L, L])
 *     Y       = M X + diag(e) C S_in^T + D X               ([L, P])
 *     S_out   = e[L-1] S_in + X^T diag(w) B,  w_s = Lm[L-1,s] dt_s
 * Every exponent is a sum of a_i over a segment, summed directly in double
 * (never a difference of cumulative sums), so it is <= 0: nothing overflows
 * and long windows with strong decay only underflow to 0.
 *
 * Backward of a chunk, given dY and dS_out (the gradient flowing into the
 * state that leaves the chunk; 0 for the last chunk), chunks in reverse:
 *     dM = dY X^T;  dX = M^T dY + diag(w) B dS_out^T + D dY
 *     dG = dM o Lm o dt_s;  dC = dG B + diag(e) dY S_in;  dB = dG^T C + diag(w) X dS_out
 *     dS_in = e[L-1] dS_out + dY^T diag(e) C
 *     ddt_s (direct) = sum_t dM G Lm [t,s] + Lm[L-1,s] (B_s . (X dS_out)_s)
 * and the decays pass gradient to each a_i: with R[t,s] = dLm[t,s] Lm[t,s],
 *     da_i = sum_{t>=i} ( e[t] de[t] + sum_{s<i} R[t,s] )
 * (de[L-1] also carries sum(dS_out o S_in) from S_out's decay), then
 *     ddt_i = direct_i + A da_i,   dA += sum_i dt_i da_i.
 *
 * Threads split (b, h) pairs, each with its own slab of `work`. dB and dC
 * (shared by the heads of a group) and dA, dD (shared by all b) are first
 * written per (b, h) and then summed in a fixed order, so results do not
 * depend on the thread count. */
#include "core/real.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "model/linear.h"
#include "model/ssd.h"

/* Every argument of a call, so that helpers take one pointer. */
typedef struct {
    int Bsz, K, H, P, G, N;
    const real *x, *dt, *A, *Bm, *Cm, *Dskip, *dy;
    int x_stride, dt_stride, B_stride, C_stride, dy_stride;
    real *y, *dx, *ddt, *dB, *dC;
    int y_stride, dx_stride, ddt_stride, dB_stride, dC_stride;
} ssd_args;

/* One (b, h) pair: pointers at its row t = 0 with the head (or group)
 * column offset applied. Row strides are those of ssd_args. */
typedef struct {
    const real *x, *B, *C, *dt, *dy;
    real *y, *dx, *ddt;
    double A, D;
} ssd_view;

static ssd_view view_of(const ssd_args *a, int b, int h) {
    size_t r0 = (size_t)b * (size_t)a->K;
    int g = h / (a->H / a->G);
    ssd_view v;
    v.x = a->x + r0 * (size_t)a->x_stride + (size_t)h * (size_t)a->P;
    v.B = a->Bm + r0 * (size_t)a->B_stride + (size_t)g * (size_t)a->N;
    v.C = a->Cm + r0 * (size_t)a->C_stride + (size_t)g * (size_t)a->N;
    v.dt = a->dt + r0 * (size_t)a->dt_stride + (size_t)h;
    v.dy = a->dy ? a->dy + r0 * (size_t)a->dy_stride + (size_t)h * (size_t)a->P : NULL;
    v.y = a->y ? a->y + r0 * (size_t)a->y_stride + (size_t)h * (size_t)a->P : NULL;
    v.dx = a->dx ? a->dx + r0 * (size_t)a->dx_stride + (size_t)h * (size_t)a->P : NULL;
    v.ddt = a->ddt ? a->ddt + r0 * (size_t)a->ddt_stride + (size_t)h : NULL;
    v.A = (double)a->A[h];
    v.D = a->Dskip ? (double)a->Dskip[h] : 0.0;
    return v;
}

static int min_int(int a, int b) { return a < b ? a : b; }

/* Threads pay off only above about this many multiply-adds (Bsz K H P N):
 * a fork/join costs microseconds, and far more when cores are shared.
 * Results are the same either way (no reduction depends on the split). */
#define SSD_MIN_PARALLEL_WORK 65536.0

static int worth_threads(const ssd_args *a) {
    return (double)a->Bsz * a->K * a->H * a->P * a->N >= SSD_MIN_PARALLEL_WORK;
}

/* ---- work layout ------------------------------------------------------ */

/* work = [dA partials (Bsz*H) | dD partials (Bsz*H) | one slab per (b, h)].
 * The sequential and the chunked backward lay their slabs out differently;
 * work_count is the larger of the two. Offsets are in reals within a slab. */
typedef struct {
    int Q, nc; /* effective chunk length (<= K) and number of chunks */
    size_t states, dS, G, Lm, dM, s1, s2, dBp, dCp, vec, size;
} chunk_layout;

typedef struct {
    size_t states, ds, dBp, dCp, ddt, size;
} seq_layout;

static chunk_layout chunk_layout_of(int K, int P, int N, int Q) {
    chunk_layout l;
    l.Q = Q < 1 ? 1 : min_int(Q, K); /* Q < 1 would be a caller's bug: never divide by it */
    l.nc = (K + l.Q - 1) / l.Q;
    size_t q = (size_t)l.Q, pn = (size_t)P * (size_t)N, kn = (size_t)K * (size_t)N;
    l.states = 0;                        /* S entering each chunk, nc x [P, N] */
    l.dS = l.states + (size_t)l.nc * pn; /* the state gradient passed back, [P, N] */
    l.G = l.dS + pn;                     /* C B^T, then M, [Q, Q] */
    l.Lm = l.G + q * q;                  /* decays, then R, [Q, Q] */
    l.dM = l.Lm + q * q;                 /* dY X^T, then dG, [Q, Q] */
    l.s1 = l.dM + q * q;                 /* X dS_out or dY S_in, [Q, N] */
    l.s2 = l.s1 + q * (size_t)N;         /* rows of B or C scaled by a decay, [Q, N] */
    l.dBp = l.s2 + q * (size_t)N;        /* this head's dB, [K, N] */
    l.dCp = l.dBp + kn;                  /* this head's dC, [K, N] */
    l.vec = l.dCp + kn;                  /* e, last row of Lm, de, ddt direct: 4 x [Q] */
    l.size = l.vec + 4 * q;
    return l;
}

static seq_layout seq_layout_of(int K, int N) {
    seq_layout l;
    size_t kn = (size_t)K * (size_t)N;
    l.states = 0; /* row p of S_t for every t, [K, N] */
    l.ds = kn;    /* the adjoint of row p of S_t, [N] */
    l.dBp = l.ds + (size_t)N;
    l.dCp = l.dBp + kn;
    l.ddt = l.dCp + kn; /* ddt of this head, summed over p, [K] */
    l.size = l.ddt + (size_t)K;
    return l;
}

size_t st_ssd_work_count(int Bsz, int K, int H, int P, int G, int N, int Q) {
    (void)G;
    if (Bsz <= 0 || K <= 0 || H <= 0) return 0;
    size_t pairs = (size_t)Bsz * (size_t)H;
    size_t cs = chunk_layout_of(K, P, N, Q).size, ss = seq_layout_of(K, N).size;
    return 2 * pairs + pairs * (cs > ss ? cs : ss);
}

/* ---- shared pieces ---------------------------------------------------- */

static double dot_d(const real *u, const real *v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++)
        s += (double)u[i] * (double)v[i];
    return s;
}

/* e[t] = exp(sum_{i<=t} a_i) over one chunk of length L. */
static void decay_from_entry(int L, const real *dt, int dt_stride, double A, real *e) {
    double acc = 0;
    for (int t = 0; t < L; t++) {
        acc += (double)dt[(size_t)t * dt_stride] * A;
        e[t] = (real)exp(acc);
    }
}

/* row[s] = exp(sum_{s<i<=t} a_i) for s = 0..t, the segment summed from t down. */
static void decay_row(int t, const real *dt, int dt_stride, double A, real *row) {
    double seg = 0;
    row[t] = 1;
    for (int s = t - 1; s >= 0; s--) {
        seg += (double)dt[(size_t)(s + 1) * dt_stride] * A;
        row[s] = (real)exp(seg);
    }
}

/* Lm (lower triangle, ld Q) and e of one chunk; `last` gets Lm's last row. */
static void chunk_decays(int L, int Q, const real *dt, int dt_stride, double A, real *Lm, real *e, real *last) {
    decay_from_entry(L, dt, dt_stride, A, e);
    for (int t = 0; t < L; t++)
        decay_row(t, dt, dt_stride, A, Lm + (size_t)t * Q);
    memcpy(last, Lm + (size_t)(L - 1) * Q, sizeof(real) * (size_t)L);
}

/* dB[r, g*N + n] = sum over the heads h of group g of that head's partial, in
 * head order: the fixed-order reduction over heads sharing B and C. */
static void reduce_group_grads(const ssd_args *a, const real *slabs, size_t slab_size, size_t off_dB, size_t off_dC) {
    int hg = a->H / a->G, K = a->K, N = a->N;
#pragma omp parallel for schedule(static) if (worth_threads(a))
    for (int r = 0; r < a->Bsz * K; r++) {
        int b = r / K, t = r % K;
        for (int g = 0; g < a->G; g++) {
            real *dBr = a->dB + (size_t)r * a->dB_stride + (size_t)g * N;
            real *dCr = a->dC + (size_t)r * a->dC_stride + (size_t)g * N;
            for (int n = 0; n < N; n++) {
                double sB = 0, sC = 0;
                for (int h = g * hg; h < (g + 1) * hg; h++) {
                    const real *slab = slabs + (size_t)(b * a->H + h) * slab_size + (size_t)t * N + n;
                    sB += (double)slab[off_dB];
                    sC += (double)slab[off_dC];
                }
                dBr[n] = (real)sB;
                dCr[n] = (real)sC;
            }
        }
    }
}

/* dA[h] += sum_b partial[b, h] and the same for dD, summed over b in order. */
static void reduce_head_grads(const ssd_args *a, const real *part, real *dA, real *dD) {
    size_t pairs = (size_t)a->Bsz * (size_t)a->H;
    for (int h = 0; h < a->H; h++) {
        double sA = 0, sD = 0;
        for (int b = 0; b < a->Bsz; b++) {
            sA += (double)part[(size_t)b * a->H + h];
            sD += (double)part[pairs + (size_t)b * a->H + h];
        }
        dA[h] += (real)sA;
        dD[h] += (real)sD;
    }
}

/* ---- sequential: the definition --------------------------------------- */

/* Rows p of S are independent recurrences, and so are the columns n, so the
 * state is carried in double on the stack in blocks of SEQ_NB columns. */
#define SEQ_NB 64

static void seq_forward_bh(const ssd_args *a, const ssd_view *v) {
    for (int p = 0; p < a->P; p++) {
        for (int n0 = 0; n0 < a->N; n0 += SEQ_NB) {
            int nb = min_int(SEQ_NB, a->N - n0);
            double s[SEQ_NB] = {0};
            for (int t = 0; t < a->K; t++) {
                double dt = v->dt[(size_t)t * a->dt_stride], xp = v->x[(size_t)t * a->x_stride + p];
                double decay = exp(dt * v->A), u = dt * xp, yp = 0;
                const real *Bt = v->B + (size_t)t * a->B_stride + n0, *Ct = v->C + (size_t)t * a->C_stride + n0;
                for (int j = 0; j < nb; j++) {
                    s[j] = decay * s[j] + u * (double)Bt[j];
                    yp += s[j] * (double)Ct[j];
                }
                real *yt = v->y + (size_t)t * a->y_stride + p;
                *yt = n0 == 0 ? (real)(v->D * xp + yp) : (real)((double)*yt + yp);
            }
        }
    }
}

void st_ssd_forward_sequential(int Bsz, int K, int H, int P, int G, int N, const real *x, int x_stride, const real *dt,
                               int dt_stride, const real *A, const real *Bm, int B_stride, const real *Cm, int C_stride,
                               const real *Dskip, real *y, int y_stride) {
    /* clang-format off */
    ssd_args a = {.Bsz = Bsz, .K = K, .H = H, .P = P, .G = G, .N = N, .x = x, .x_stride = x_stride, .dt = dt,
                  .dt_stride = dt_stride, .A = A, .Bm = Bm, .B_stride = B_stride, .Cm = Cm, .C_stride = C_stride,
                  .Dskip = Dskip, .y = y, .y_stride = y_stride};
    /* clang-format on */
#pragma omp parallel for schedule(static) if (worth_threads(&a))
    for (int bh = 0; bh < Bsz * H; bh++) {
        ssd_view v = view_of(&a, bh / H, bh % H);
        seq_forward_bh(&a, &v);
    }
}

/* Reverse mode of the recurrence for one (b, h), one row p of S at a time:
 * rebuild s_t = S_t[p, :] for all t, then walk back with its adjoint
 *     ds_t = dy_t[p] C_t + exp(a_{t+1}) ds_{t+1}.
 * Writes dx and ddt, fills the head's dB/dC partials, returns dA/dD parts. */
static void seq_backward_bh(const ssd_args *a, const ssd_view *v, const seq_layout *lay, real *slab, double *dA_part,
                            double *dD_part) {
    int K = a->K, N = a->N;
    real *St = slab + lay->states, *ds = slab + lay->ds, *dBp = slab + lay->dBp, *dCp = slab + lay->dCp;
    real *dd = slab + lay->ddt;
    memset(dBp, 0, sizeof(real) * (size_t)K * N);
    memset(dCp, 0, sizeof(real) * (size_t)K * N);
    memset(dd, 0, sizeof(real) * (size_t)K);
    double sA = 0, sD = 0;
    for (int p = 0; p < a->P; p++) {
        for (int t = 0; t < K; t++) {
            double dt = v->dt[(size_t)t * a->dt_stride], decay = exp(dt * v->A);
            double u = dt * v->x[(size_t)t * a->x_stride + p];
            const real *Bt = v->B + (size_t)t * a->B_stride;
            real *s = St + (size_t)t * N;
            for (int n = 0; n < N; n++)
                s[n] = (real)((t ? decay * s[n - N] : 0.0) + u * (double)Bt[n]);
        }
        memset(ds, 0, sizeof(real) * (size_t)N);
        for (int t = K - 1; t >= 0; t--) {
            double dt = v->dt[(size_t)t * a->dt_stride], decay = exp(dt * v->A);
            double xp = v->x[(size_t)t * a->x_stride + p], g = v->dy[(size_t)t * a->dy_stride + p];
            double carry = t + 1 < K ? exp((double)v->dt[(size_t)(t + 1) * a->dt_stride] * v->A) : 0.0;
            const real *Bt = v->B + (size_t)t * a->B_stride, *Ct = v->C + (size_t)t * a->C_stride;
            const real *s = St + (size_t)t * N;
            real *dBt = dBp + (size_t)t * N, *dCt = dCp + (size_t)t * N;
            for (int n = 0; n < N; n++)
                ds[n] = (real)(carry * ds[n] + g * (double)Ct[n]);
            double dot_B = dot_d(ds, Bt, N), dot_prev = t ? dot_d(ds, s - N, N) : 0.0;
            for (int n = 0; n < N; n++) {
                dCt[n] += (real)(g * (double)s[n]);
                dBt[n] += (real)(dt * xp * (double)ds[n]);
            }
            v->dx[(size_t)t * a->dx_stride + p] = (real)(v->D * g + dt * dot_B);
            dd[t] += (real)(xp * dot_B + v->A * decay * dot_prev);
            sA += dt * decay * dot_prev;
            sD += g * xp;
        }
    }
    for (int t = 0; t < K; t++)
        v->ddt[(size_t)t * a->ddt_stride] = dd[t];
    *dA_part = sA;
    *dD_part = sD;
}

void st_ssd_backward_sequential(int Bsz, int K, int H, int P, int G, int N, const real *x, int x_stride, const real *dt,
                                int dt_stride, const real *A, const real *Bm, int B_stride, const real *Cm,
                                int C_stride, const real *Dskip, const real *dy, int dy_stride, real *dx, int dx_stride,
                                real *ddt, int ddt_stride, real *dA, real *dB, int dB_stride, real *dC, int dC_stride,
                                real *dD, real *work) {
    if (Bsz <= 0 || K <= 0) return;
    /* clang-format off */
    ssd_args a = {.Bsz = Bsz, .K = K, .H = H, .P = P, .G = G, .N = N, .x = x, .x_stride = x_stride, .dt = dt,
                  .dt_stride = dt_stride, .A = A, .Bm = Bm, .B_stride = B_stride, .Cm = Cm, .C_stride = C_stride,
                  .Dskip = Dskip, .dy = dy, .dy_stride = dy_stride, .dx = dx, .dx_stride = dx_stride, .ddt = ddt,
                  .ddt_stride = ddt_stride, .dB = dB, .dB_stride = dB_stride, .dC = dC, .dC_stride = dC_stride};
    /* clang-format on */
    seq_layout lay = seq_layout_of(K, N);
    size_t pairs = (size_t)Bsz * H;
    real *part = work, *slabs = work + 2 * pairs;
#pragma omp parallel for schedule(static) if (worth_threads(&a))
    for (int bh = 0; bh < Bsz * H; bh++) {
        ssd_view v = view_of(&a, bh / H, bh % H);
        double pA, pD;
        seq_backward_bh(&a, &v, &lay, slabs + (size_t)bh * lay.size, &pA, &pD);
        part[bh] = (real)pA;
        part[pairs + bh] = (real)pD;
    }
    reduce_group_grads(&a, slabs, lay.size, lay.dBp, lay.dCp);
    reduce_head_grads(&a, part, dA, dD);
}

/* ---- chunked forward -------------------------------------------------- */

/* One chunk's geometry: start row, length, and the (b, h) view's rows there. */
typedef struct {
    int t0, L;
    const real *X, *B, *C, *dt, *dY;
} chunk_rows;

static chunk_rows chunk_at(const ssd_args *a, const ssd_view *v, int Q, int c) {
    chunk_rows k;
    k.t0 = c * Q;
    k.L = min_int(Q, a->K - k.t0);
    k.X = v->x + (size_t)k.t0 * a->x_stride;
    k.B = v->B + (size_t)k.t0 * a->B_stride;
    k.C = v->C + (size_t)k.t0 * a->C_stride;
    k.dt = v->dt + (size_t)k.t0 * a->dt_stride;
    k.dY = v->dy ? v->dy + (size_t)k.t0 * a->dy_stride : NULL;
    return k;
}

/* out[t, :] = scale[t] * in[t, :] for t < L (out contiguous with ld N). */
static void scale_rows(int L, int N, const real *scale, const real *dt, int dt_stride, const real *in, int in_stride,
                       real *out) {
    for (int t = 0; t < L; t++) {
        double f = (double)scale[t] * (dt ? (double)dt[(size_t)t * dt_stride] : 1.0);
        for (int n = 0; n < N; n++)
            out[(size_t)t * N + n] = (real)(f * (double)in[(size_t)t * in_stride + n]);
    }
}

/* S = e[L-1] S + X^T diag(w) B with w_s = last[s] dt_s (S = that sum when
 * `first`, since S enters the first chunk as 0). s2 is scratch. */
static void chunk_pass_state(const ssd_args *a, const chunk_rows *k, const real *e, const real *last, int first,
                             real *s2, real *S) {
    scale_rows(k->L, a->N, last, k->dt, a->dt_stride, k->B, a->B_stride, s2);
    st_gemm(1, 0, a->P, a->N, k->L, 1, k->X, a->x_stride, s2, a->N, first ? 0 : e[k->L - 1], S, a->N);
}

/* G[t,s] = (C_t . B_s) Lm[t,s] dt_s for s <= t, 0 above: the masked M. */
static void chunk_mask(int L, int Q, const real *Lm, const real *dt, int dt_stride, real *G) {
    for (int t = 0; t < L; t++) {
        real *Gt = G + (size_t)t * Q;
        const real *Lt = Lm + (size_t)t * Q;
        for (int s = 0; s <= t; s++)
            Gt[s] = (real)((double)Gt[s] * (double)Lt[s] * (double)dt[(size_t)s * dt_stride]);
        for (int s = t + 1; s < L; s++)
            Gt[s] = 0;
    }
}

static void chunk_forward_bh(const ssd_args *a, const ssd_view *v, const chunk_layout *lay, real *slab) {
    int P = a->P, N = a->N, Q = lay->Q;
    real *S = slab + lay->states, *G = slab + lay->G, *Lm = slab + lay->Lm, *s2 = slab + lay->s2;
    real *e = slab + lay->vec, *last = e + Q;
    for (int c = 0; c < lay->nc; c++) {
        chunk_rows k = chunk_at(a, v, Q, c);
        real *Y = v->y + (size_t)k.t0 * a->y_stride;
        chunk_decays(k.L, Q, k.dt, a->dt_stride, v->A, Lm, e, last);
        st_gemm(0, 1, k.L, k.L, N, 1, k.C, a->C_stride, k.B, a->B_stride, 0, G, Q);
        chunk_mask(k.L, Q, Lm, k.dt, a->dt_stride, G);
        st_gemm(0, 0, k.L, P, k.L, 1, G, Q, k.X, a->x_stride, 0, Y, a->y_stride);
        if (c > 0) { /* the state carried in: Y += diag(e) C S^T */
            scale_rows(k.L, N, e, NULL, 0, k.C, a->C_stride, s2);
            st_gemm(0, 1, k.L, P, N, 1, s2, N, S, N, 1, Y, a->y_stride);
        }
        for (int t = 0; t < k.L; t++)
            for (int p = 0; p < P; p++)
                Y[(size_t)t * a->y_stride + p] += (real)(v->D * (double)k.X[(size_t)t * a->x_stride + p]);
        if (c + 1 < lay->nc) chunk_pass_state(a, &k, e, last, c == 0, s2, S);
    }
}

void st_ssd_forward_chunked(int Bsz, int K, int H, int P, int G, int N, int Q, const real *x, int x_stride,
                            const real *dt, int dt_stride, const real *A, const real *Bm, int B_stride, const real *Cm,
                            int C_stride, const real *Dskip, real *y, int y_stride, real *work) {
    if (Bsz <= 0 || K <= 0) return;
    /* clang-format off */
    ssd_args a = {.Bsz = Bsz, .K = K, .H = H, .P = P, .G = G, .N = N, .x = x, .x_stride = x_stride, .dt = dt,
                  .dt_stride = dt_stride, .A = A, .Bm = Bm, .B_stride = B_stride, .Cm = Cm, .C_stride = C_stride,
                  .Dskip = Dskip, .y = y, .y_stride = y_stride};
    /* clang-format on */
    chunk_layout lay = chunk_layout_of(K, P, N, Q);
    real *slabs = work + 2 * (size_t)Bsz * H;
#pragma omp parallel for schedule(static) if (worth_threads(&a))
    for (int bh = 0; bh < Bsz * H; bh++) {
        ssd_view v = view_of(&a, bh / H, bh % H);
        chunk_forward_bh(&a, &v, &lay, slabs + (size_t)bh * lay.size);
    }
}

/* ---- chunked backward ------------------------------------------------- */

/* Recompute the state entering every chunk: states[c], states[0] = 0. */
static void chunk_states_bh(const ssd_args *a, const ssd_view *v, const chunk_layout *lay, real *slab) {
    size_t pn = (size_t)a->P * a->N;
    real *states = slab + lay->states, *s2 = slab + lay->s2, *e = slab + lay->vec, *last = e + lay->Q;
    memset(states, 0, sizeof(real) * pn);
    for (int c = 0; c + 1 < lay->nc; c++) {
        chunk_rows k = chunk_at(a, v, lay->Q, c);
        decay_from_entry(k.L, k.dt, a->dt_stride, v->A, e);
        decay_row(k.L - 1, k.dt, a->dt_stride, v->A, last);
        real *S = states + (size_t)(c + 1) * pn;
        if (c > 0) memcpy(S, S - pn, sizeof(real) * pn);
        chunk_pass_state(a, &k, e, last, c == 0, s2, S);
    }
}

/* The element-wise part of the intra-chunk backward, column by column so
 * that ddt's direct part sums over t in double. On entry G = C B^T, Lm the
 * decays, dM = dY X^T; on exit G = M, dM = dG (both 0 above the diagonal),
 * Lm = R (strictly below the diagonal; R[t,t] = 0 since Lm[t,t] depends on
 * no a_i). */
static void chunk_intra_grads(int L, int Q, const real *dt, int dt_stride, real *G, real *Lm, real *dM,
                              real *ddt_direct) {
    for (int s = 0; s < L; s++) {
        double dts = dt[(size_t)s * dt_stride], acc = 0;
        for (int t = 0; t < s; t++)
            G[(size_t)t * Q + s] = dM[(size_t)t * Q + s] = 0; /* causal mask */
        for (int t = s; t < L; t++) {
            size_t i = (size_t)t * Q + s;
            double g = G[i], l = Lm[i], d = dM[i];
            double q = d * g * l; /* dM o G o Lm */
            acc += q;
            G[i] = (real)(g * l * dts);
            dM[i] = (real)(d * l * dts);
            Lm[i] = t > s ? (real)(q * dts) : 0;
        }
        ddt_direct[s] = (real)acc;
    }
}

/* The terms of S_out = e[L-1] S_in + X^T diag(w) B given dS_out: dX, dB,
 * ddt direct, and R's last row (the gradient into w's decays). */
static void chunk_state_out_grads(const ssd_args *a, const chunk_rows *k, const chunk_layout *lay, real *slab, real *dX,
                                  real *dBc) {
    int N = a->N, L = k->L, Q = lay->Q;
    const real *dS = slab + lay->dS, *last = slab + lay->vec + Q;
    real *s1 = slab + lay->s1, *s2 = slab + lay->s2, *R = slab + lay->Lm, *dd = slab + lay->vec + 3 * Q;
    st_gemm(0, 0, L, N, a->P, 1, k->X, a->x_stride, dS, N, 0, s1, N); /* X dS_out */
    for (int s = 0; s < L; s++) {
        const real *Bs = k->B + (size_t)s * a->B_stride, *XdS = s1 + (size_t)s * N;
        double dts = k->dt[(size_t)s * a->dt_stride], w = (double)last[s] * dts;
        double dw = dot_d(Bs, XdS, N);
        for (int n = 0; n < N; n++)
            dBc[(size_t)s * N + n] += (real)(w * (double)XdS[n]);
        dd[s] = (real)((double)dd[s] + dw * (double)last[s]);
        if (s < L - 1) R[(size_t)(L - 1) * Q + s] = (real)((double)R[(size_t)(L - 1) * Q + s] + dw * last[s] * dts);
    }
    scale_rows(L, N, last, k->dt, a->dt_stride, k->B, a->B_stride, s2); /* diag(w) B */
    st_gemm(0, 1, L, a->P, N, 1, s2, N, dS, N, 1, dX, a->dx_stride);
}

/* The terms of Y += diag(e) C S_in^T: dC, de (with the decay of S_in into
 * S_out), and dS becomes dS_in = e[L-1] dS_out + dY^T diag(e) C. */
static void chunk_state_in_grads(const ssd_args *a, const chunk_rows *k, const chunk_layout *lay, real *slab,
                                 const real *S_in, real *dCc) {
    int N = a->N, L = k->L, Q = lay->Q;
    size_t pn = (size_t)a->P * N;
    real *dS = slab + lay->dS, *s1 = slab + lay->s1, *s2 = slab + lay->s2;
    const real *e = slab + lay->vec;
    real *de = slab + lay->vec + 2 * Q;
    double ddc = dot_d(dS, S_in, (int)pn);                                /* S_out's factor e[L-1] on S_in */
    st_gemm(0, 0, L, N, a->P, 1, k->dY, a->dy_stride, S_in, N, 0, s1, N); /* dY S_in */
    for (int t = 0; t < L; t++) {
        const real *Ct = k->C + (size_t)t * a->C_stride, *dYS = s1 + (size_t)t * N;
        de[t] = (real)dot_d(Ct, dYS, N);
        for (int n = 0; n < N; n++)
            dCc[(size_t)t * N + n] += (real)((double)e[t] * (double)dYS[n]);
    }
    de[L - 1] = (real)((double)de[L - 1] + ddc);
    scale_rows(L, N, e, NULL, 0, k->C, a->C_stride, s2); /* diag(e) C */
    st_gemm(1, 0, a->P, N, L, 1, k->dY, a->dy_stride, s2, N, e[L - 1], dS, N);
}

/* da_i = sum_{t>=i} (e[t] de[t] + sum_{s<i} R[t,s]): each row of R becomes
 * its prefix sums (seeded by e de), then columns are summed from the
 * diagonal down. Writes ddt = direct + A da and returns sum_i dt_i da_i. */
static double chunk_decay_grads(const ssd_args *a, const ssd_view *v, const chunk_rows *k, const chunk_layout *lay,
                                real *slab, int has_in) {
    int L = k->L, Q = lay->Q;
    real *R = slab + lay->Lm;
    const real *e = slab + lay->vec, *de = e + 2 * Q, *dd = e + 3 * Q;
    for (int t = 0; t < L; t++) {
        real *Rt = R + (size_t)t * Q;
        double acc = has_in ? (double)e[t] * (double)de[t] : 0.0;
        for (int s = 0; s <= t; s++) {
            double here = s < t ? (double)Rt[s] : 0.0;
            Rt[s] = (real)acc;
            acc += here;
        }
    }
    double sA = 0;
    for (int i = 0; i < L; i++) {
        double da = 0;
        for (int t = i; t < L; t++)
            da += (double)R[(size_t)t * Q + i];
        double dts = k->dt[(size_t)i * a->dt_stride];
        v->ddt[(size_t)(k->t0 + i) * a->ddt_stride] = (real)((double)dd[i] + v->A * da);
        sA += dts * da;
    }
    return sA;
}

/* One chunk, with dS holding dS_out on entry and dS_in on exit. */
static void chunk_backward_one(const ssd_args *a, const ssd_view *v, const chunk_layout *lay, real *slab, int c,
                               double *sA, double *sD) {
    int P = a->P, N = a->N, Q = lay->Q;
    chunk_rows k = chunk_at(a, v, Q, c);
    real *G = slab + lay->G, *Lm = slab + lay->Lm, *dM = slab + lay->dM;
    real *e = slab + lay->vec, *last = e + Q, *dd = e + 3 * Q;
    real *dX = v->dx + (size_t)k.t0 * a->dx_stride;
    real *dBc = slab + lay->dBp + (size_t)k.t0 * N, *dCc = slab + lay->dCp + (size_t)k.t0 * N;
    chunk_decays(k.L, Q, k.dt, a->dt_stride, v->A, Lm, e, last);
    st_gemm(0, 1, k.L, k.L, N, 1, k.C, a->C_stride, k.B, a->B_stride, 0, G, Q);
    st_gemm(0, 1, k.L, k.L, P, 1, k.dY, a->dy_stride, k.X, a->x_stride, 0, dM, Q);
    chunk_intra_grads(k.L, Q, k.dt, a->dt_stride, G, Lm, dM, dd);
    st_gemm(1, 0, k.L, P, k.L, 1, G, Q, k.dY, a->dy_stride, 0, dX, a->dx_stride); /* M^T dY */
    st_gemm(0, 0, k.L, N, k.L, 1, dM, Q, k.B, a->B_stride, 0, dCc, N);            /* dG B */
    st_gemm(1, 0, k.L, N, k.L, 1, dM, Q, k.C, a->C_stride, 0, dBc, N);            /* dG^T C */
    if (c + 1 < lay->nc) chunk_state_out_grads(a, &k, lay, slab, dX, dBc);
    if (c > 0) chunk_state_in_grads(a, &k, lay, slab, slab + lay->states + (size_t)c * P * N, dCc);
    for (int t = 0; t < k.L; t++) {
        for (int p = 0; p < P; p++) {
            double g = k.dY[(size_t)t * a->dy_stride + p], xp = k.X[(size_t)t * a->x_stride + p];
            real *d = dX + (size_t)t * a->dx_stride + p;
            *d = (real)((double)*d + v->D * g);
            *sD += g * xp;
        }
    }
    *sA += chunk_decay_grads(a, v, &k, lay, slab, c > 0);
}

static void chunk_backward_bh(const ssd_args *a, const ssd_view *v, const chunk_layout *lay, real *slab,
                              double *dA_part, double *dD_part) {
    chunk_states_bh(a, v, lay, slab);
    memset(slab + lay->dS, 0, sizeof(real) * (size_t)a->P * a->N);
    double sA = 0, sD = 0;
    for (int c = lay->nc - 1; c >= 0; c--)
        chunk_backward_one(a, v, lay, slab, c, &sA, &sD);
    *dA_part = sA;
    *dD_part = sD;
}

void st_ssd_backward_chunked(int Bsz, int K, int H, int P, int G, int N, int Q, const real *x, int x_stride,
                             const real *dt, int dt_stride, const real *A, const real *Bm, int B_stride, const real *Cm,
                             int C_stride, const real *Dskip, const real *dy, int dy_stride, real *dx, int dx_stride,
                             real *ddt, int ddt_stride, real *dA, real *dB, int dB_stride, real *dC, int dC_stride,
                             real *dD, real *work) {
    if (Bsz <= 0 || K <= 0) return;
    /* clang-format off */
    ssd_args a = {.Bsz = Bsz, .K = K, .H = H, .P = P, .G = G, .N = N, .x = x, .x_stride = x_stride, .dt = dt,
                  .dt_stride = dt_stride, .A = A, .Bm = Bm, .B_stride = B_stride, .Cm = Cm, .C_stride = C_stride,
                  .Dskip = Dskip, .dy = dy, .dy_stride = dy_stride, .dx = dx, .dx_stride = dx_stride, .ddt = ddt,
                  .ddt_stride = ddt_stride, .dB = dB, .dB_stride = dB_stride, .dC = dC, .dC_stride = dC_stride};
    /* clang-format on */
    chunk_layout lay = chunk_layout_of(K, P, N, Q);
    size_t pairs = (size_t)Bsz * H;
    real *part = work, *slabs = work + 2 * pairs;
#pragma omp parallel for schedule(static) if (worth_threads(&a))
    for (int bh = 0; bh < Bsz * H; bh++) {
        ssd_view v = view_of(&a, bh / H, bh % H);
        double pA, pD;
        chunk_backward_bh(&a, &v, &lay, slabs + (size_t)bh * lay.size, &pA, &pD);
        part[bh] = (real)pA;
        part[pairs + bh] = (real)pD;
    }
    reduce_group_grads(&a, slabs, lay.size, lay.dBp, lay.dCp);
    reduce_head_grads(&a, part, dA, dD);
}
