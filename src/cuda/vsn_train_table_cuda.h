/* vsn_train_table_cuda.h: the training step's bar table (model/vsn_train_table.cu).
 *
 * A minibatch of n windows has n K rows but far fewer distinct bars (a
 * window row's snapshot features are its bar's: env/window.h), and the
 * VSN's per-variable GRN outputs t_j depend on those features alone. So
 * the training step forms t_j once a distinct bar of the minibatch:
 *   index    the rows' bar ids (their feature rows, 0 <= key < bars) ->
 *            each row's compact bar crow[r], the distinct count nb (on
 *            the device: a captured graph cannot read it), each compact
 *            bar's first row first[b], and the CSR of rows per compact bar
 *            (srow[offs[b] .. offs[b+1]), ascending rows): a stable radix
 *            sort of (key, row) pairs, head flags, a scan; no floating
 *            point, no atomics: the same index run to run;
 *   forward  tab[b] = t(s of row first[b]) for b < nb, v[r] = sum_j
 *            alpha[r, j] tab[crow[r], j] (cuda/vsn_forward_fused_cuda.h's
 *            fill; the combine st_cuda_vsn_train_table_combine, a bar at a
 *            time over its rows: the table read once a bar);
 *   backward st_cuda_vsn_train_table_backward: per row dalpha[r, j] =
 *            t_j[crow[r]] . dv[r] (+ the caller's dalpha), per compact bar
 *            dT[b, j] = sum over its rows, ascending, of alpha[r, j] dv[r]
 *            (double, rounded once); then the per-variable GRNs' backward
 *            over the nb bars with dT as t_j's gradient
 *            (cuda/vsn_backward_fused_cuda.h).
 * Grids are sized for cap = min(rows_max, bars) and stop at nb. Device
 * pointers throughout; stream a cudaStream_t (NULL: default). */
#ifndef ST_VSN_TRAIN_TABLE_CUDA_H
#define ST_VSN_TRAIN_TABLE_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int rows_max;                           /* rows an index build takes */
    int bars;                               /* keys lie in [0, bars) */
    int cap;                                /* min(rows_max, bars): the most compact bars */
    int bits;                               /* the radix sort's key bits: ceil(log2(bars)) */
    int *iota, *skey, *srow, *head, *hscan; /* [rows_max] each */
    int *crow;                              /* [rows_max] each row's compact bar */
    int *offs;                              /* [cap + 1] CSR offsets into srow */
    int *first;                             /* [cap] each compact bar's first row */
    int *count;                             /* [1] nb, the distinct bars of the last build */
    void *temp;                             /* cub's temporary storage */
    size_t temp_bytes;
    size_t total_bytes; /* of the carve */
} st_vsn_bar_index;

/* Lays the index out over base (device; NULL: a size pass) for rows_max
 * rows and keys below bars; returns ST_OK or ST_ERR_INPUT (bad sizes) and
 * sets ix->total_bytes. */
int st_cuda_vsn_bar_index_at(st_vsn_bar_index *ix, void *base, int rows_max, int bars);

/* Builds the index of rows (<= rows_max) keys key[rows] (device ints, each
 * in [0, bars): unchecked, the caller's window builder draws them so). */
int st_cuda_vsn_bar_index_build(const st_vsn_bar_index *ix, int rows, const int *key, void *stream);

/* The table backward's first step (module comment): dad [F][rows] doubles
 * (the fused backward's dalpha layout, for st_cuda_vsn_backward_fused_dlog)
 * and dT [cap, F Dv] floats (rows past nb untouched). tab [cap, F Dv]
 * (the forward's table), alpha [rows, F], dv [rows, Dv], dalpha (NULL:
 * none) [rows, F] at their strides. Dv <= 32. */
int st_cuda_vsn_train_table_grad(const st_vsn_bar_index *ix, int rows, int F, int Dv, const float *tab,
                                 const float *alpha, int alpha_stride, const float *dv, int dv_stride,
                                 const float *dalpha, int dalpha_stride, double *dad, float *dT, void *stream);

/* The training forward's combine: v[r, :] = sum_j alpha[r, j] tab[crow[r],
 * j Dv ..] over j in order in double, rounded once (st_cuda_vsn_table_combine's
 * sum: the same bits) for each row r < rows of the last build, walked a
 * compact bar at a time through the CSR so that a bar's table row is read
 * once. alpha [rows, F], v [rows, Dv] at their strides; Dv <= 32. */
int st_cuda_vsn_train_table_combine(const st_vsn_bar_index *ix, int rows, int F, int Dv, const float *tab,
                                    const float *alpha, int alpha_stride, float *v, int v_stride, void *stream);

/* 1 (the default): that combine for F <= 64 by the staged kernel (a bar's
 * F table values issued at once into shared memory by cp.async, its rows
 * in groups of 4 converting each table value once a group;
 * bench/notes-ttc.md); 0 (and F > 64): the kernel a row at a time with the
 * table in batches of 8. The same bits either way. */
void st_cuda_vsn_set_tt_combine_stage(int on);

#ifdef __cplusplus
}
#endif

#endif
