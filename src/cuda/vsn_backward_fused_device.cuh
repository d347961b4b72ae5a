/* vsn_backward_fused_device.cuh: what the fused VSN backward's two kernels
 * share (model/vsn_backward_fused.cu, the fp32 FMA one, and
 * model/vsn_backward_fused_tc.cu, its products on the tensor cores in bf16
 * mode): the launch's arguments, a block's partial layout (which
 * bwd_finish_kernel reads) and the staging of a variable's vectors. CUDA
 * sources only. */
#ifndef ST_VSN_BACKWARD_FUSED_DEVICE_CUH
#define ST_VSN_BACKWARD_FUSED_DEVICE_CUH

#include <cuda_runtime.h>

struct bwd_args {
    int rows, F, s_stride, alpha_stride, dv_stride, dalpha_stride;
    long ntiles;
    int splits;
    const float *s, *alpha, *dv, *dalpha, *W2, *Wg, *U, *V, *Vg, *ew, *eb, *lnw, *lnb;
    double *dad;   /* dalpha_j [F][rows] */
    double *dsv;   /* the ds part [F][rows], or NULL */
    double *parts; /* [splits][F][NP] */
    /* the table mode (st_cuda_vsn_backward_fused_table): row r's s is s row src_rows[r], alpha is
     * NULL (1: dv is t_j's own gradient dT, variable j's at dv + j dv_jstride), dad NULL, and the
     * rows end at min(rows, *nrows) (a device count; the tiles are split over it). NULL / 0: none */
    const int *src_rows, *nrows;
    int dv_jstride;
};

/* A block's partial (doubles): dWg [2DV][DV], dW2 [DV][DV], gg [2DV], fc2_b [DV], then the column
 * sums ln_w, X, Sx, q, Q [DV] each; and the eight vectors' order in shared memory ([8][DV]). */
template <int DV> struct bwd_part {
    static constexpr int NWG = 2 * DV * DV, GG = 3 * DV * DV, FB = GG + 2 * DV, NACC = FB + DV;
    enum { CLNW, CX, CSX, CQ1, CQS, NCOLV };
    static constexpr int NCOL = NCOLV * DV, NP = NACC + NCOL;
    enum { U, V, B1, B2, EW, EB, LNW, LNB };
};

/* Variable j's eight vectors into vec [8][DV] (bwd_part's order), T threads; A: any launch's
 * arguments with the vectors' pointers (bwd_args; fused_args for model/vsn_table_fill_tc.cu). */
template <int DV, int T, class A> __device__ static inline void bwd_stage_vec(const A &a, int j, float *vec, int tid) {
    typedef bwd_part<DV> S;
    for (int i = tid; i < 8 * DV; i += T) {
        const int which = i / DV, k = i % DV;
        const size_t jk = (size_t)j * DV + k;
        vec[i] = which == S::U     ? a.U[jk]
                 : which == S::V   ? a.V[jk]
                 : which == S::B1  ? a.Vg[2 * (size_t)j * DV + k]
                 : which == S::B2  ? a.Vg[2 * (size_t)j * DV + DV + k]
                 : which == S::EW  ? a.ew[jk]
                 : which == S::EB  ? a.eb[jk]
                 : which == S::LNW ? a.lnw[jk]
                                   : a.lnb[jk];
    }
}

/* The tensor-core kernel (model/vsn_backward_fused_tc.cu) for Dv 16 or 32,
 * a's splits and partial layout; tt: the table mode. */
int vsn_bwd_tc_launch(const bwd_args &a, int Dv, bool tt, cudaStream_t st);

#endif
