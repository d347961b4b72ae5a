/* model_cuda.h: the whole encoder and heads of DESIGN section 5 on the GPU,
 * float32 (the CUDA twin of model/model.h), composed of the CUDA ops:
 *
 *   window X [n, K, F+C] (row stride x_stride >= F+C, device)
 *   -> VSN over s = X[:, :, 0:F] with context c = X[:, :, F:F+C]   -> v [rows, Dv]
 *   -> u0 = w_in([v; c])                                           [rows, D]
 *   -> u_{l+1} = Mamba2 block l (u_l), l = 0..L-1
 *   -> heads on ln_f(u_L[row K-1]) and c[row K-1]: logits [n, A], value [n]
 * The context c reaches the output along three paths (the VSN's selection
 * GRN, w_in and the heads): its gradient is the sum of the three.
 *
 * Parameters and gradients are flat DEVICE buffers in the parameter table's
 * layout (model/params.h), so a host copy of the CPU model's weights goes up
 * with one cudaMemcpy; the model does not own them. Activations (including
 * each block's saved state and the scratch) are carved out of one
 * cudaMalloc, sized for up to max_windows windows, rows contiguous.
 *
 * Every call is asynchronous on the model's stream (a cudaStream_t; NULL:
 * the default stream) and returns ST_OK, ST_ERR_INPUT, ST_ERR_MEMORY or
 * ST_ERR_DEVICE (message in st_last_error()). Parameter gradients are added
 * to (a caller zeroes them once per step), in a fixed order: two runs give
 * the same bits. */
#ifndef ST_MODEL_CUDA_H
#define ST_MODEL_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "model/params.h"

struct st_cuda_model_views; /* device pointers into w and g, per tensor (private) */
struct st_cuda_train_table; /* the training step's bar table (private; st_cuda_model_train_table_init) */

/* The NaN/Inf tracer's hook: called (during the forward / backward, on the
 * host, in stream order) right after each labelled activation is written,
 * with the label's (phase, kind, index) of trace/trace.h: forward labels
 * under scan_phase (act or train), backward labels under bwd. p is a device
 * pointer to a [rows, width] tensor of row stride `stride`. The hook
 * enqueues its scan on the model's stream and returns an ST_* status. */
typedef int (*st_cuda_scan_fn)(void *ctx, int phase, int kind, int index, const float *p, int64_t rows,
                               int64_t width, int64_t stride);

typedef struct {
    st_dims d;
    int max_windows;
    const st_param_table *table;
    float *w, *g; /* flat device parameters and gradients (not owned) */
    void *stream; /* cudaStream_t of every call (NULL: default stream) */
    st_cuda_scan_fn scan; /* tracer hook (NULL: none) */
    void *scan_ctx;
    int scan_phase; /* ST_PHASE_ACT or ST_PHASE_TRAIN of the next forward */
    struct st_cuda_model_views *views;
    /* activations of the last forward (one device allocation, `arena`) */
    void *arena;
    size_t arena_bytes;
    int n;         /* windows of the last forward */
    const float *x; /* its input window (device; NULL after st_cuda_model_forward_rows) */
    int x_stride;
    float *vsn_v;     /* [rows, Dv] */
    float *vsn_alpha; /* [rows, F] */
    float *vsn_saved;
    float *vc;         /* [rows, Dv+C] input of w_in */
    float **u;         /* host array [L+1] of device [rows, D] */
    float **mix_saved; /* host array [L] */
    float *heads_saved;
    /* backward scratch */
    float *du_a, *du_b; /* [rows, D] */
    float *dvc;         /* [rows, Dv+C] */
    float *dc_rows;     /* [rows, C] context gradient when the caller wants no dX */
    float *dc_head;     /* [n, C] */
    float *work;
    /* the training step's bar table (NULL: none) and whether the last forward went through it */
    struct st_cuda_train_table *tt;
    int tt_used;
    int tail_used; /* the last forward ran the last block's tail (st_cuda_model_set_last_row_tail) */
} st_cuda_model;

/* Device bytes of the activations for up to max_windows windows. */
size_t st_cuda_model_activation_bytes(const st_dims *d, int max_windows);

/* Validates d, allocates the activations and binds w_dev, g_dev (device
 * buffers of t->total floats, laid out by t; t must outlive the model). */
int st_cuda_model_init(st_cuda_model *m, const st_dims *d, const st_param_table *t, int max_windows, float *w_dev,
                       float *g_dev);
void st_cuda_model_free(st_cuda_model *m);
/* Points the model at other device parameter/gradient buffers of the same layout. */
void st_cuda_model_bind(st_cuda_model *m, float *w_dev, float *g_dev);

/* Forward over 0 < n <= max_windows windows; logits [n, A] (row stride
 * logits_stride), value [n] contiguous; all device pointers. X must stay
 * unchanged until the matching backward. */
int st_cuda_model_forward(st_cuda_model *m, int n, const float *X, int x_stride, float *logits, int logits_stride,
                          float *value);

/* The action step's bar table. The VSN's per-variable GRN outputs t_j
 * depend on a window row's snapshot features alone, and those are a
 * market bar's (the window builder copies them), so while the weights
 * stay fixed (a rollout's T steps, an evaluation) t_j can be formed once a
 * bar instead of once a window row (K = 64 times a bar at the default
 * preset). st_cuda_model_table_build fills tab [bars, F Dv] floats from
 * the snapshot rows s (row stride s_stride: a market's features) with the
 * current weights; st_cuda_model_forward_table is st_cuda_model_forward
 * with the VSN's v combined from tab (tab_row [n K] device ints: each
 * window row's bar, st_cuda_window_feature_rows): the same logits, value
 * and saved state, bit for bit, where window row r's snapshot equals bar
 * tab_row[r]'s (so st_cuda_model_backward may follow either). The table
 * must be built again after every change of the weights: the training
 * step, whose weights change every minibatch, runs st_cuda_model_forward.
 * st_cuda_model_table_fits: 1 when the model can use a table (Dv 8, 16 or
 * 32). */
int st_cuda_model_table_fits(const st_cuda_model *m);
int st_cuda_model_table_build(st_cuda_model *m, long bars, const float *s, int s_stride, float *tab);
int st_cuda_model_forward_table(st_cuda_model *m, int n, const float *X, int x_stride, const float *tab,
                                const int *tab_row, float *logits, int logits_stride, float *value);

/* The action step's forward from its observation's description instead of
 * a materialised window: window b's row k is feature row
 * feat_row[b K + k] of feat (row stride feat_stride >= F: a market's
 * features, st_cuda_features' data; feat_row from
 * st_cuda_window_feature_rows, [n K] device ints) and its context is
 * ctx[b] (row stride ctx_stride >= C), the same in every row, as the
 * window builder would copy them. Nothing [n K, F + C] is read or
 * written: s is gathered through the index, the selection GRN's ctx
 * product is formed once a window and added to its rows, [v; c] and the
 * heads take c from ctx. The window forward's math, not its bits (the
 * per-window product is a cuBLAS product of another shape: within fp32
 * rounding, the test's 1e-5). tab: the VSN's per-variable part from a bar
 * table built from feat (st_cuda_model_table_build; its rows are
 * feat_row's), else run over the gathered rows: with and without a table
 * the same bits. No backward may follow (it needs a window; ST_ERR_INPUT). */
int st_cuda_model_forward_rows(st_cuda_model *m, int n, const float *feat, int feat_stride, const int *feat_row,
                               const float *ctx, int ctx_stride, const float *tab, float *logits, int logits_stride,
                               float *value);

/* The training step's bar table (cuda/vsn_train_table_cuda.h). The
 * training step's weights change every minibatch, so the action step's
 * table cannot serve it; but a minibatch's n K rows reference far fewer
 * distinct bars (8,192 windows of a 96,000-bar market: at most 96,000 of
 * 524,288 rows), so st_cuda_model_forward_train_table finds them on the
 * device (each row's bar: bar_rows [n K] device ints in [0, bars), e.g.
 * st_cuda_window_feature_rows), forms the VSN's per-variable GRN outputs
 * once a distinct bar and combines each row's v from them; the backward
 * that follows (st_cuda_model_backward with dX NULL) sums their gradient
 * per bar and runs the per-variable GRNs' backward over the bars. Logits,
 * value and every parameter gradient within fp32 rounding of
 * st_cuda_model_forward + backward (the reductions run in another order);
 * bit-identical run to run. With dX wanted, or where the table
 * backward's scratch does not fit the VSN's work (minibatches of a few
 * dozen rows: st_cuda_vsn_train_table_work_fits), the backward runs the
 * per-row VSN backward (valid after either forward).
 * st_cuda_model_train_table_init: once, after st_cuda_model_init; bars
 * bounds the keys; tab (NULL: allocated) is device storage of tab_floats
 * floats the model may use for the table (min(max_windows K, bars) x F
 * Dv floats; the trainer lends the action step's table, rebuilt before
 * each rollout). Freed by st_cuda_model_free.
 * st_cuda_model_set_train_table: ST_CUDA_TRAIN_TABLE_AUTO (the default),
 * _OFF or _ON; st_cuda_model_train_table_wanted says whether a trainer or
 * bench with minibatches of max_windows windows over a market of bars
 * feature rows uses it (the trainer passes the global minibatch, not a
 * rank's share, so that every rank count decides alike; each rank's
 * index is sized for its own windows): never when off or where the fused
 * VSN kernels do not take Dv; always else when on; under auto when the
 * distinct bars expected of uniformly drawn windows, bars (1 - exp(-rows
 * / bars)), are at most 0.8 of the rows (below that the table's extra
 * passes, the combine and the per-bar gradient sum, cost more than they
 * save). */
#define ST_CUDA_TRAIN_TABLE_AUTO (-1)
#define ST_CUDA_TRAIN_TABLE_OFF 0
#define ST_CUDA_TRAIN_TABLE_ON 1
void st_cuda_model_set_train_table(int mode);
int st_cuda_model_train_table_wanted(const st_dims *d, int max_windows, long bars);
int st_cuda_model_train_table_init(st_cuda_model *m, long bars, float *tab, size_t tab_floats);
/* Device bytes the model allocated for its training table (index, and the table where not lent). */
size_t st_cuda_model_train_table_bytes(const st_cuda_model *m);
int st_cuda_model_forward_train_table(st_cuda_model *m, int n, const float *X, int x_stride, const int *bar_rows,
                                      float *logits, int logits_stride, float *value);

/* The last block's tail (cuda/mamba2_cuda.h's st_cuda_mamba2_forward_last):
 * the heads read u_L at row K-1 alone, so block L-1 runs the SSD, the gated
 * RMSNorm, out_proj and the residual at the last rows only (1, the
 * default) or over every row as the other blocks (0: for the tests and the
 * bench, `ssmtrade bench --last-row-tail 0`). Logits, value and every
 * gradient within fp32 rounding either way. Where the tail's SSD cannot
 * hold a window in shared memory (st_cuda_mamba2_last_fits: long windows,
 * many heads) the full block runs whatever the switch says. u_L's rows <
 * K-1 are written only by the full block (the tracer's label of u_L
 * covers the last rows).
 * Process-wide, read when a forward is enqueued (a captured graph keeps
 * its setting); the backward follows its forward's. */
void st_cuda_model_set_last_row_tail(int on);
int st_cuda_model_last_row_tail(void);

/* Backward of the last forward: parameter gradients are added to m->g; dX
 * (the window's gradient, [n*K, F+C] at row stride dx_stride; NULL: not
 * wanted) is written, its padding untouched. */
int st_cuda_model_backward(st_cuda_model *m, const float *dlogits, int dlogits_stride, const float *dvalue, float *dX,
                           int dx_stride);

#endif
