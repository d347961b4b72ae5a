/* cmd_bench.c: `ssmtrade bench` (DESIGN section 12, issue 7): GPU
 * benchmarks of the card's ceilings, the training step, the action step,
 * the environment + window builder and full PPO training, on the built-in
 * synthetic market at a model preset (default: K=64, 551,100 parameters).
 * Prints a table per benchmark and, with --json, every number with its
 * configuration (bench/compare.py sets it beside PyTorch's). Measurements
 * live in bench_gpu.c. Without a CUDA device it says so and exits 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/bench.h"
#include "cli/commands.h"
#include "core/device.h"
#include "core/error.h"
#include "data/dataset.h"
#include "model/params.h"
#include "train/train_config.h"
#ifdef ST_HAVE_CUDA
#include "cuda/layernorm_cuda.h" /* st_cuda_layernorm_set_fused_grad */
#include "cuda/linear_cuda.h"    /* st_cuda_rowsplit_set_tickets */
#include "cuda/model_cuda.h"     /* st_cuda_model_set_train_table, _set_last_row_tail */
#include "cuda/ssd_cuda.h"       /* st_cuda_ssd_set_scan_quad_backward, _backward_mma, _set_scan_tc_quad */
#include "cuda/vsn_cuda.h"
#include "cuda/vsn_backward_fused_cuda.h" /* st_cuda_vsn_set_fused_backward_tc */
#include "cuda/vsn_forward_fused_cuda.h" /* st_cuda_vsn_set_fused_tc, _set_table_fill_j */
#include "cuda/vsn_train_table_cuda.h" /* st_cuda_vsn_set_tt_combine_stage */
#endif

static const st_flag flags[] = {
    {"preset", "NAME", "model sizes: default (K=64, 551,100 parameters), tiny, large or odd"},
    {"what", "LIST", "comma list of ceilings,train,act,envwin,e2e (default: all)"},
    {"windows", "LIST", "training-step sizes in windows (default 128,2048,8192)"},
    {"envs", "LIST", "action-step sizes in environments (default 128,4096)"},
    {"precision", "LIST", "matrix-product precisions: fp32, bf16 (default fp32,bf16)"},
    {"repeats", "N", "timed runs per measurement (default 50)"},
    {"warmup", "N", "untimed runs before them (default 10)"},
    {"sets", "N", "input sets rotated over, one CUDA graph each (default 4)"},
    {"envwin-envs", "B", "environments of the env + window builder benchmark (default 65536)"},
    {"e2e-envs", "LIST", "full PPO sizes B (default 4096,16384)"},
    {"e2e-minibatch", "N", "windows per PPO minibatch in e2e (default 8192)"},
    {"e2e-updates", "N", "timed PPO updates after one warm-up update (default 2)"},
    {"e2e-rollout", "T", "rollout length of e2e (default 64)"},
    {"e2e-epochs", "E", "PPO epochs of e2e (default 4)"},
    {"gemm-size", "N", "M = N = K of the GEMM ceilings (default 8192)"},
    {"copy-mib", "N", "bytes of the device-to-device copy ceiling in MiB (default 1024)"},
    {"seed", "N", "seed of the inputs and weights (default 1)"},
    {"vsn-fused", "0|1", "the VSN forward's per-variable GRNs as one fused kernel (1, default) or unfused (0)"},
    {"bar-table", "0|1", "act: the VSN's per-variable GRNs once a bar through the rollout's bar table (1, default) or "
                         "once a window row (0)"},
    {"act-window", "0|1", "act: the observation as a materialised window and the window forward (1; the path "
                          "before no-window) or as its feature-row index and context (0, default: the trainer's)"},
    {"train-table", "-1|0|1", "train, e2e: the VSN's per-variable GRNs once a distinct bar of the minibatch (1), "
                              "once a window row (0), or the trainer's choice (-1, default)"},
    {"last-row-tail", "0|1", "train, act, e2e: the last Mamba2 block past its SSD at the last row of each window "
                             "only, what the heads read (1, default), or over every row (0)"},
    {"scan-quad-backward", "0|1", "train, e2e: in bf16 mode the SSD backward of windows of K <= 64 rows as one "
                                  "chunk a (window, group) (1, default), or the scan backward a (window, head) (0)"},
    {"scan-quad-mma", "0|1|2", "train, e2e: that quad backward's products as raw mma.sync with shared loads, dX, dC, "
                               "dB straight to global (1; 2, default: TF32 rounding by an integer add), or through "
                               "WMMA and shared memory (0)"},
    {"scan-quad", "0|1", "train, act, e2e: the SSD forward in bf16 mode for windows of at most 64 rows as one chunk "
                         "in the quadratic form, a block a (window, group) (1, default), or by the pair kernels (0)"},
    {"vsn-tc", "0|1", "train, act, e2e (bf16): the fused VSN forward's and bar tables' per-variable products on the "
                      "tensor cores (1, default) or as fp32 FMAs (0)"},
    {"colsum-fill", "0|1", "train, e2e: narrow column sums (bias gradients) split over ~512 blocks (1, default) or "
                           "64 a column tile (0)"},
    {"rowsplit-tickets", "0|1", "column sums over row splits finished by their last blocks (1, default) or by a "
                                "finish kernel each (0)"},
    {"ln-fused-grad", "0|1", "train, e2e: the LayerNorm backward's dx, dw and db in one pass (1, default) or the dx "
                             "kernel then the parameter sums' (0)"},
    {"tt-combine-stage", "0|1", "train, e2e: the training step's VSN combine through the bar table by the staged "
                                "kernel, a bar's table issued at once (1, default), or a row at a time (0)"},
    {"vsn-bwd-tc", "0|1", "train, e2e (bf16): the fused VSN backward's products on the tensor cores (1, default) or as "
                          "fp32 FMAs (0)"},
    {"vsn-bwd-fsum", "0|1", "train, e2e (bf16): that kernel's column sums in fp32 within a tile (1, default) or "
                            "double (0)"},
    {"vsn-fill-j", "0|1", "train, act, e2e (bf16): the VSN bar table's fill a block per (variable, row split), the "
                          "weights staged once as bf16 fragments (1, default), or a block per rows walking the "
                          "variables (0); the same bits"},
    {"segment", "S", "train, e2e: each minibatch as segments of S consecutive rollout steps of one environment "
                     "(the trainer's --segment; default: its default); train draws its windows so"},
    {"json", "FILE", "write every number with its configuration to FILE"},
    {"config", "FILE", "JSON file of flag values (flags win)"},
};
#define N_FLAGS (int)(sizeof flags / sizeof flags[0])

/* "128,2048" -> {128, 2048}; every entry a positive whole number. */
static int parse_list(const st_args *a, const char *flag, const char *def, st_bench_list *l) {
    const char *text = st_args_str(a, flag, def);
    char buf[256];
    ST_REQUIRE(strlen(text) < sizeof buf, ST_ERR_INPUT, "--%s: list too long", flag);
    strcpy(buf, text);
    l->n = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *end;
        long v = strtol(tok, &end, 10);
        ST_REQUIRE(end != tok && *end == 0 && v > 0 && v <= (1L << 30), ST_ERR_INPUT,
                   "--%s: '%s' is not a positive whole number", flag, tok);
        ST_REQUIRE(l->n < ST_BENCH_MAX_LIST, ST_ERR_INPUT, "--%s: at most %d values", flag, ST_BENCH_MAX_LIST);
        l->v[l->n++] = (int)v;
    }
    ST_REQUIRE(l->n > 0, ST_ERR_INPUT, "--%s: empty list", flag);
    return ST_OK;
}

static int parse_what(const st_args *a, st_bench_opts *o) {
    char buf[256];
    const char *text = st_args_str(a, "what", "all");
    ST_REQUIRE(strlen(text) < sizeof buf, ST_ERR_INPUT, "--what: list too long");
    strcpy(buf, text);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int all = strcmp(tok, "all") == 0, hit = all;
        if (all || strcmp(tok, "ceilings") == 0) o->do_ceilings = hit = 1;
        if (all || strcmp(tok, "train") == 0) o->do_train = hit = 1;
        if (all || strcmp(tok, "act") == 0) o->do_act = hit = 1;
        if (all || strcmp(tok, "envwin") == 0) o->do_envwin = hit = 1;
        if (all || strcmp(tok, "e2e") == 0) o->do_e2e = hit = 1;
        ST_REQUIRE(hit, ST_ERR_INPUT, "--what: unknown benchmark '%s' (ceilings, train, act, envwin, e2e or all)",
                   tok);
    }
    ST_REQUIRE(o->do_ceilings + o->do_train + o->do_act + o->do_envwin + o->do_e2e > 0, ST_ERR_INPUT,
               "--what: nothing to run");
    return ST_OK;
}

static int parse_precision(const st_args *a, st_bench_list *l) {
    char buf[64];
    const char *text = st_args_str(a, "precision", "fp32,bf16");
    ST_REQUIRE(strlen(text) < sizeof buf, ST_ERR_INPUT, "--precision: list too long");
    strcpy(buf, text);
    l->n = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int p = strcmp(tok, "fp32") == 0 ? 0 : strcmp(tok, "bf16") == 0 ? 1 : -1;
        ST_REQUIRE(p >= 0, ST_ERR_INPUT, "--precision: '%s' is neither fp32 nor bf16", tok);
        ST_REQUIRE(l->n < ST_BENCH_MAX_LIST, ST_ERR_INPUT, "--precision: too many values");
        l->v[l->n++] = p;
    }
    ST_REQUIRE(l->n > 0, ST_ERR_INPUT, "--precision: empty list");
    return ST_OK;
}

static int positive(const st_args *a, const char *flag, int def, int lo, int hi, int *out) {
    ST_TRY(st_args_int(a, flag, def, out));
    ST_REQUIRE(*out >= lo && *out <= hi, ST_ERR_INPUT, "--%s: %d is outside [%d, %d]", flag, *out, lo, hi);
    return ST_OK;
}

static int parse_opts(const st_args *a, st_bench_opts *o) {
    memset(o, 0, sizeof *o);
    const char *preset = st_args_str(a, "preset", "default");
    ST_REQUIRE(strlen(preset) < sizeof o->preset, ST_ERR_INPUT, "--preset: '%s' is too long", preset);
    strcpy(o->preset, preset);
    ST_TRY(st_args_dims(a, "default", &o->d));
    ST_TRY(parse_what(a, o));
    ST_TRY(parse_list(a, "windows", "128,2048,8192", &o->windows));
    ST_TRY(parse_list(a, "envs", "128,4096", &o->envs));
    ST_TRY(parse_list(a, "e2e-envs", "4096,16384", &o->e2e_envs));
    ST_TRY(parse_precision(a, &o->precision));
    ST_TRY(positive(a, "repeats", 50, 1, 100000, &o->repeats));
    ST_TRY(positive(a, "warmup", 10, 0, 100000, &o->warmup));
    ST_TRY(positive(a, "sets", 4, 1, ST_BENCH_MAX_SETS, &o->sets));
    ST_TRY(positive(a, "envwin-envs", 65536, 1, 1 << 24, &o->envwin_envs));
    ST_TRY(positive(a, "e2e-minibatch", 8192, 1, 1 << 24, &o->e2e_minibatch));
    ST_TRY(positive(a, "e2e-updates", 2, 1, 1000, &o->e2e_updates));
    ST_TRY(positive(a, "e2e-rollout", 64, 1, 4096, &o->e2e_rollout));
    ST_TRY(positive(a, "e2e-epochs", 4, 1, 64, &o->e2e_epochs));
    ST_TRY(positive(a, "gemm-size", 8192, 16, 32768, &o->gemm_size));
    ST_TRY(positive(a, "copy-mib", 1024, 1, 65536, &o->copy_mib));
    ST_TRY(st_args_int(a, "vsn-fused", 1, &o->vsn_fused));
    ST_REQUIRE(o->vsn_fused == 0 || o->vsn_fused == 1, ST_ERR_INPUT, "--vsn-fused: %d is neither 0 nor 1",
               o->vsn_fused);
    ST_TRY(st_args_int(a, "bar-table", 1, &o->bar_table));
    ST_REQUIRE(o->bar_table == 0 || o->bar_table == 1, ST_ERR_INPUT, "--bar-table: %d is neither 0 nor 1",
               o->bar_table);
    ST_TRY(st_args_int(a, "act-window", 0, &o->act_window));
    ST_REQUIRE(o->act_window == 0 || o->act_window == 1, ST_ERR_INPUT, "--act-window: %d is neither 0 nor 1",
               o->act_window);
    ST_TRY(st_args_int(a, "train-table", -1, &o->train_table));
    ST_REQUIRE(o->train_table >= -1 && o->train_table <= 1, ST_ERR_INPUT,
               "--train-table: %d is not -1 (the trainer's choice), 0 or 1", o->train_table);
    ST_TRY(st_args_int(a, "last-row-tail", 1, &o->last_row_tail));
    ST_REQUIRE(o->last_row_tail == 0 || o->last_row_tail == 1, ST_ERR_INPUT, "--last-row-tail: %d is neither 0 nor 1",
               o->last_row_tail);
    ST_TRY(st_args_int(a, "scan-quad-backward", 1, &o->scan_quad_backward));
    ST_REQUIRE(o->scan_quad_backward == 0 || o->scan_quad_backward == 1, ST_ERR_INPUT,
               "--scan-quad-backward: %d is neither 0 nor 1", o->scan_quad_backward);
    ST_TRY(st_args_int(a, "scan-quad-mma", 2, &o->scan_quad_mma));
    ST_REQUIRE(o->scan_quad_mma >= 0 && o->scan_quad_mma <= 2, ST_ERR_INPUT, "--scan-quad-mma: %d is not 0, 1 or 2",
               o->scan_quad_mma);
    ST_TRY(st_args_int(a, "scan-quad", 1, &o->scan_quad));
    ST_REQUIRE(o->scan_quad == 0 || o->scan_quad == 1, ST_ERR_INPUT, "--scan-quad: %d is neither 0 nor 1",
               o->scan_quad);
    ST_TRY(st_args_int(a, "vsn-tc", 1, &o->vsn_tc));
    ST_REQUIRE(o->vsn_tc == 0 || o->vsn_tc == 1, ST_ERR_INPUT, "--vsn-tc: %d is neither 0 nor 1", o->vsn_tc);
    ST_TRY(positive(a, "rowsplit-tickets", 1, 0, 1, &o->rowsplit_tickets));
    ST_TRY(positive(a, "colsum-fill", 1, 0, 1, &o->colsum_fill));
    ST_TRY(positive(a, "ln-fused-grad", 1, 0, 1, &o->ln_fused_grad));
    ST_TRY(positive(a, "tt-combine-stage", 1, 0, 1, &o->tt_combine_stage));
    ST_TRY(st_args_int(a, "vsn-bwd-tc", 1, &o->vsn_bwd_tc));
    ST_REQUIRE(o->vsn_bwd_tc == 0 || o->vsn_bwd_tc == 1, ST_ERR_INPUT, "--vsn-bwd-tc: %d is neither 0 nor 1",
               o->vsn_bwd_tc);
    ST_TRY(positive(a, "vsn-bwd-fsum", 1, 0, 1, &o->vsn_bwd_fsum));
    ST_TRY(positive(a, "vsn-fill-j", 1, 0, 1, &o->vsn_fill_j));
    st_train_config tc; /* the trainer's defaults: the minibatch's segments and the episode length */
    ST_TRY(st_train_config_default(&tc, "default"));
    int seg_def = tc.segment;
    o->episode_length = tc.episode_length;
    st_train_config_free(&tc);
    ST_TRY(positive(a, "segment", seg_def, 1, 1 << 20, &o->segment));
    long long seed;
    ST_TRY(st_args_i64(a, "seed", 1, &seed));
    o->seed = (uint64_t)seed;
    return ST_OK;
}

static cJSON *int_array(const st_bench_list *l) {
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < l->n; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(l->v[i]));
    return arr;
}

/* The configuration every number of the file was measured under. */
static void add_config(cJSON *root, const st_bench_opts *o, size_t params) {
    const st_dims *d = &o->d;
    cJSON_AddStringToObject(root, "tool", "ssmtrade bench");
    cJSON_AddStringToObject(root, "device", st_cuda_describe());
    cJSON_AddStringToObject(root, "preset", o->preset);
    cJSON *dims = cJSON_AddObjectToObject(root, "dims");
    const struct {
        const char *k;
        int v;
    } dv[] = {{"K", d->K}, {"F", d->F}, {"C", d->C}, {"Dv", d->Dv}, {"D", d->D}, {"L", d->L},
              {"expand", d->expand}, {"headdim", d->headdim}, {"N", d->N}, {"G", d->G}, {"W", d->W},
              {"Q", d->Q}, {"Hh", d->Hh}, {"A", d->A}};
    for (size_t i = 0; i < sizeof dv / sizeof dv[0]; i++) cJSON_AddNumberToObject(dims, dv[i].k, dv[i].v);
    cJSON_AddNumberToObject(root, "parameters", (double)params);
    cJSON_AddNumberToObject(root, "repeats", o->repeats);
    cJSON_AddNumberToObject(root, "warmup", o->warmup);
    cJSON_AddNumberToObject(root, "sets", o->sets);
    cJSON_AddNumberToObject(root, "seed", (double)o->seed);
    cJSON_AddItemToObject(root, "windows", int_array(&o->windows));
    cJSON_AddItemToObject(root, "envs", int_array(&o->envs));
    cJSON_AddItemToObject(root, "e2e_envs", int_array(&o->e2e_envs));
    cJSON *pr = cJSON_AddArrayToObject(root, "precision");
    for (int i = 0; i < o->precision.n; i++)
        cJSON_AddItemToArray(pr, cJSON_CreateString(st_bench_precision_name(o->precision.v[i])));
    cJSON_AddNumberToObject(root, "envwin_envs", o->envwin_envs);
    cJSON_AddNumberToObject(root, "e2e_minibatch", o->e2e_minibatch);
    cJSON_AddNumberToObject(root, "e2e_rollout", o->e2e_rollout);
    cJSON_AddNumberToObject(root, "e2e_epochs", o->e2e_epochs);
    cJSON_AddNumberToObject(root, "gemm_size", o->gemm_size);
    cJSON_AddNumberToObject(root, "vsn_fused", o->vsn_fused);
    cJSON_AddNumberToObject(root, "bar_table", o->bar_table);
    cJSON_AddNumberToObject(root, "act_window", o->act_window);
    cJSON_AddNumberToObject(root, "train_table", o->train_table);
    cJSON_AddNumberToObject(root, "last_row_tail", o->last_row_tail);
    cJSON_AddNumberToObject(root, "scan_quad_backward", o->scan_quad_backward);
    cJSON_AddNumberToObject(root, "scan_quad_mma", o->scan_quad_mma);
    cJSON_AddNumberToObject(root, "scan_quad", o->scan_quad);
    cJSON_AddNumberToObject(root, "segment", o->segment);
    cJSON_AddNumberToObject(root, "vsn_tc", o->vsn_tc);
    cJSON_AddNumberToObject(root, "rowsplit_tickets", o->rowsplit_tickets);
    cJSON_AddNumberToObject(root, "colsum_fill", o->colsum_fill);
    cJSON_AddNumberToObject(root, "ln_fused_grad", o->ln_fused_grad);
    cJSON_AddNumberToObject(root, "tt_combine_stage", o->tt_combine_stage);
    cJSON_AddNumberToObject(root, "vsn_bwd_tc", o->vsn_bwd_tc);
    cJSON_AddNumberToObject(root, "vsn_bwd_fsum", o->vsn_bwd_fsum);
    cJSON_AddNumberToObject(root, "vsn_fill_j", o->vsn_fill_j);
    if (o->do_train && o->windows.n > 0) {
        /* the hand count per window, for the roofline of any implementation of the same step */
        st_bench_cost c = st_bench_train_cost(d, 1, params);
        cJSON_AddNumberToObject(root, "train_flops_per_window", c.flops);
    }
}

static int write_json(const char *path, cJSON *root) {
    char *text = cJSON_Print(root);
    ST_REQUIRE(text, ST_ERR_MEMORY, "out of memory printing the JSON");
    FILE *f = fopen(path, "w");
    int ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f) != 0) ok = 0;
    cJSON_free(text);
    ST_REQUIRE(ok, ST_ERR_IO, "--json %s: cannot write the file", path);
    return ST_OK;
}

int st_cmd_bench(int argc, char **argv) {
    st_args a;
    int rc = st_args_parse(argc, argv, flags, N_FLAGS, &a);
    if (rc == ST_OK && a.help) {
        st_args_usage(stdout, "bench",
                      "GPU benchmarks on the built-in synthetic market: the card's ceilings (copy bandwidth, "
                      "GEMM TFLOP/s),\nthe training step, the action step, environment + window builder and "
                      "full PPO (env steps/s).\nCUDA graphs, CUDA events, medians over repeats, rotating "
                      "inputs; --json for bench/compare.py.\nWithout a CUDA device it says so and exits 0.",
                      flags, N_FLAGS);
        st_args_free(&a);
        return 0;
    }
    st_bench_opts o;
    if (rc == ST_OK) rc = parse_opts(&a, &o);
    const char *json = rc == ST_OK ? st_args_str(&a, "json", NULL) : NULL;
    if (rc != ST_OK) {
        st_args_free(&a);
        return rc;
    }
    if (!st_cuda_built() || st_cuda_devices() == 0) {
        printf("ssmtrade bench needs a CUDA device: %s. Nothing was measured.\n", st_cuda_describe());
        if (json) {
            cJSON *root = cJSON_CreateObject();
            cJSON_AddStringToObject(root, "tool", "ssmtrade bench");
            cJSON_AddStringToObject(root, "skipped", st_cuda_describe());
            rc = write_json(json, root);
            cJSON_Delete(root);
        }
        st_args_free(&a);
        return rc;
    }

    st_param_table table = {0};
    st_train_config cfg;
    memset(&cfg, 0, sizeof cfg);
    st_market m;
    memset(&m, 0, sizeof m);
    int have_market = 0;
    rc = st_param_table_build(&o.d, &table);
    if (rc == ST_OK) rc = st_train_config_default(&cfg, o.preset);
    if (rc == ST_OK) {
        st_data_opts dop = st_data_opts_default(o.d.K);
        rc = st_market_synthetic((uint64_t)cfg.market_seed, cfg.instruments, cfg.bars, &dop, &m);
        have_market = rc == ST_OK;
    }
    cJSON *root = cJSON_CreateObject();
    int failed = 0;
    if (rc == ST_OK) {
        o.market = &m;
#ifdef ST_HAVE_CUDA
        st_cuda_vsn_set_fused(o.vsn_fused);
        st_cuda_model_set_train_table(o.train_table);
        st_cuda_model_set_last_row_tail(o.last_row_tail);
        st_cuda_ssd_set_scan_quad_backward(o.scan_quad_backward);
        st_cuda_ssd_set_scan_quad_backward_mma(o.scan_quad_mma);
        st_cuda_ssd_set_scan_tc_quad(o.scan_quad);
        st_cuda_vsn_set_fused_tc(o.vsn_tc);
        st_cuda_rowsplit_set_tickets(o.rowsplit_tickets);
        st_cuda_colsum_set_fill(o.colsum_fill);
        st_cuda_layernorm_set_fused_grad(o.ln_fused_grad);
        st_cuda_vsn_set_tt_combine_stage(o.tt_combine_stage);
        st_cuda_vsn_set_fused_backward_tc(o.vsn_bwd_tc);
        st_cuda_vsn_set_fused_backward_tc_fsum(o.vsn_bwd_fsum);
        st_cuda_vsn_set_table_fill_j(o.vsn_fill_j);
#endif
        printf("ssmtrade bench: %s\npreset %s (K=%d, %zu parameters), synthetic market seed %lld (%d instruments x "
               "%d bars)\n",
               st_cuda_describe(), o.preset, o.d.K, table.total, cfg.market_seed, cfg.instruments, cfg.bars);
        fflush(stdout);
        add_config(root, &o, table.total);
        if (o.do_ceilings) failed += st_bench_ceilings(&o, root);
        if (o.do_train) failed += st_bench_train(&o, root);
        if (o.do_act) failed += st_bench_act(&o, root);
        if (o.do_envwin) failed += st_bench_envwin(&o, root);
        if (o.do_e2e) failed += st_bench_e2e(&o, root);
        cJSON_AddNumberToObject(root, "failed", failed);
        if (json) rc = write_json(json, root);
        if (rc == ST_OK && json) printf("\nwrote %s\n", json);
    }
    cJSON_Delete(root);
    if (have_market) st_market_free(&m);
    st_train_config_free(&cfg);
    st_param_table_free(&table);
    st_args_free(&a);
    if (rc == ST_OK && failed > 0) rc = ST_FAIL(ST_ERR_DEVICE, "%d benchmark configuration(s) failed (see above)", failed);
    return rc;
}
