/* bench.h: the pieces of `ssmtrade bench` (issue 7) that cmd_bench.c
 * (flags, market, JSON, table) shares with bench_gpu.c (the measurements).
 *
 * Every GPU time is taken with CUDA events around each launch on one
 * created stream, after a warm-up; a measurement reports the median and
 * the 10th and 90th percentiles of its repeats in milliseconds. The
 * training and environment benchmarks capture their step as CUDA graphs
 * (one per input set, rotated) and time each replay. */
#ifndef ST_BENCH_H
#define ST_BENCH_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "data/market.h"

#define ST_BENCH_MAX_LIST 8
#define ST_BENCH_MAX_SETS 16

typedef struct {
    int n;
    int v[ST_BENCH_MAX_LIST];
} st_bench_list;

typedef struct {
    char preset[16];
    st_dims d;
    int do_ceilings, do_train, do_act, do_envwin, do_e2e;
    st_bench_list windows;   /* training step sizes */
    st_bench_list envs;      /* action step sizes */
    st_bench_list e2e_envs;  /* full PPO sizes B */
    st_bench_list precision; /* st_matmul_precision values */
    int envwin_envs;         /* B of the environment + window builder benchmark */
    int e2e_minibatch;       /* windows per PPO minibatch in e2e */
    int e2e_updates;         /* timed updates (after one warm-up update) */
    int e2e_rollout;         /* T */
    int e2e_epochs;          /* E */
    int repeats, warmup, sets;
    int gemm_size;    /* M = N = K of the GEMM ceilings */
    int copy_mib;     /* bytes of the copy ceiling, MiB */
    int vsn_fused;    /* the VSN forward fused (1) or unfused (0): st_cuda_vsn_set_fused */
    int bar_table;    /* act: through the rollout's bar table (1) or not (0) */
    int act_window;   /* act: a materialised window and the window forward (1) or the row index (0) */
    int train_table;  /* train: the training bar table (1), the VSN a row (0), the trainer's choice (-1):
                       * st_cuda_model_set_train_table */
    int last_row_tail; /* the last block's last-row tail (1) or the full block (0): st_cuda_model_set_last_row_tail */
    int scan_quad_backward; /* bf16, K <= 64: the SSD backward a (window, group) as one chunk (1) or the scan
                             * backward (0): st_cuda_ssd_set_scan_quad_backward */
    int scan_quad_mma;      /* that backward's products as raw mma.sync (1; 2: integer TF32 rounding) or WMMA (0):
                             * st_cuda_ssd_set_scan_quad_backward_mma */
    int scan_quad;     /* the SSD forward's quad kernel for windows of <= 64 rows (1) or not (0):
                        * st_cuda_ssd_set_scan_tc_quad */
    int vsn_tc;        /* bf16: the fused VSN's products on the tensor cores (1) or fp32 FMAs (0): st_cuda_vsn_set_fused_tc */
    int rowsplit_tickets; /* row-split sums finished by their last blocks (1) or finish kernels (0):
                           * st_cuda_rowsplit_set_tickets */
    int colsum_fill;      /* narrow column sums over ~512 blocks (1) or 64 a tile (0): st_cuda_colsum_set_fill */
    int ln_fused_grad;    /* the LayerNorm backward's dx, dw, db in one pass (1) or two kernels (0):
                           * st_cuda_layernorm_set_fused_grad */
    int tt_combine_stage; /* the training combine through the bar table staged (1) or a row at a time (0):
                           * st_cuda_vsn_set_tt_combine_stage */
    int vsn_bwd_tc;    /* bf16: the VSN backward on the tensor cores (1) or fp32 (0): st_cuda_vsn_set_fused_backward_tc */
    int vsn_bwd_fsum;  /* bf16: its column sums fp32 within a tile (1) or double (0): ..._tc_fsum */
    int vsn_fill_j;    /* bf16: the bar table's fill a block per (variable, row split) (1) or per rows (0):
                        * st_cuda_vsn_set_table_fill_j */
    int segment;        /* train and e2e: a minibatch's windows as segments of this many consecutive steps of one
                         * environment (the trainer's --segment; default: its default) */
    int episode_length; /* train: the episode length H of the segments' draw (the trainer's default) */
    uint64_t seed;
    const st_market *market; /* the built-in synthetic market (training split) */
} st_bench_opts;

typedef struct {
    double median, p10, p90; /* milliseconds */
    int count;
} st_bench_times;

/* Sorts x[0..n) and gives its median, 10th and 90th percentiles (linear
 * interpolation between order statistics). */
st_bench_times st_bench_summarize(double *x, int n);

/* Hand-counted work of one training step over n windows (forward +
 * backward of the model, DESIGN section 5; formulas in bench_gpu.c). */
typedef struct {
    double flops;      /* matrix products and the SSD's contractions; element-wise work not counted */
    double bytes;      /* estimate of DRAM traffic */
    double act_bytes;  /* the GPU model's activation arena */
} st_bench_cost;
st_bench_cost st_bench_train_cost(const st_dims *d, int n, size_t params);

/* The measurements: each appends its results to the JSON object `out`
 * (members named after the benchmark) and prints its rows. A failing
 * configuration records {"error": message} and the rest still run; the
 * return value is the number of configurations that failed. */
int st_bench_ceilings(const st_bench_opts *o, cJSON *out);
int st_bench_train(const st_bench_opts *o, cJSON *out);
int st_bench_act(const st_bench_opts *o, cJSON *out);
int st_bench_envwin(const st_bench_opts *o, cJSON *out);
int st_bench_e2e(const st_bench_opts *o, cJSON *out);

/* "fp32" / "bf16" */
const char *st_bench_precision_name(int p);

#endif
