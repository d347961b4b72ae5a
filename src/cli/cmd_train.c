/* cmd_train.c: `ssmtrade train`: PPO on the built-in synthetic market or
 * on CSV data, with checkpoints, a metrics file and progress lines
 * (DESIGN sections 6, 10, 12). Every hyper-parameter is a flag and a key of
 * the JSON --config file (train/train_config.h); flags win.
 * The NaN/Inf tracer (--trace, --inject, --poison-padding; trace/guard.h)
 * wraps each update; on a trip the run stops with the report and a dump. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/run_setup.h"
#include "core/device.h"
#include "core/error.h"
#include "report/tboard.h"
#include "trace/guard.h"
#include "trace/trace.h"
#include "train/checkpoint.h"
#include "train/trainer.h"
#include "train/trainer_cuda.h"

static const st_flag extra_flags[] = {
    ST_DIMS_FLAGS,
    {"out", "RUNDIR", "run folder: checkpoints, metrics.jsonl, config.json (runs/train)"},
    {"resume", "CKPT", "continue the run of this checkpoint (bit-identical)"},
    {"device", "cpu|cuda", "backend (default: cuda when a GPU is present, else cpu; cuda runs the whole step on the GPU)"},
    {"quiet", NULL, "no progress lines"},
    {"config", "FILE", "JSON file of flag values (flags win)"},
    {"trace", "off|sentinel|full", "NaN/Inf tracer: off, sentinel (scalar checks, replay on a trip), full scans"},
    {"inject", "L:S:I[:nan|inf]", "write NaN/Inf into label L at step S, flat index I (drills, tests)"},
    {"poison-padding", NULL, "activation rows wider than their width, the gap a tagged NaN"},
    {"trace-dump", "DIR", "where a trip's dump goes (RUNDIR/trace_dump)"},
};
#define N_EXTRA (int)(sizeof extra_flags / sizeof extra_flags[0])

static int mkdir_p(const char *path) {
    char buf[1200];
    ST_REQUIRE(strlen(path) < sizeof buf, ST_ERR_INPUT, "path too long: %s", path);
    memcpy(buf, path, strlen(path) + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return ST_FAIL(ST_ERR_IO, "cannot create folder %s: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return ST_FAIL(ST_ERR_IO, "cannot create folder %s: %s", buf, strerror(errno));
    return ST_OK;
}

static void progress_line(const st_update_stats *s, const st_train_config *c, const char *trace) {
    char ep[32];
    if (isnan(s->mean_episode_R)) snprintf(ep, sizeof ep, "   n/a");
    else snprintf(ep, sizeof ep, "%+6.2f", s->mean_episode_R);
    printf("update %4ld/%d  steps %9ld  %7.0f steps/s  pi %+.4f  v %.4f  ent %.3f  kl %.4f  clip %.3f  "
           "epR %s (%d)  ev %+.2f  lr %.2e  trace %s\n",
           s->update, c->updates, s->env_steps, (double)c->dims.T * c->dims.B / s->seconds, s->loss.policy,
           s->loss.value, s->loss.entropy, s->loss.approx_kl, s->loss.clipfrac, ep, s->episodes, s->explained_var,
           s->lr, trace);
    fflush(stdout);
}

static void progress_bar(long done, long total, double elapsed) {
    if (!isatty(fileno(stderr))) return;
    int width = 30, fill = (int)(width * done / (total > 0 ? total : 1));
    double eta = done > 0 ? elapsed / (double)done * (double)(total - done) : 0;
    fprintf(stderr, "\r[%.*s%*s] %ld/%ld  eta %4.0fs ", fill, "##############################", width - fill, "",
            done, total, eta);
    if (done == total) fputc('\n', stderr);
    fflush(stderr);
}

static void metrics_jsonl(FILE *f, const st_update_stats *s) {
    char ep[32] = "null";
    if (!isnan(s->mean_episode_R)) snprintf(ep, sizeof ep, "%.6g", s->mean_episode_R);
    fprintf(f,
            "{\"update\": %ld, \"env_steps\": %ld, \"seconds\": %.4f, \"lr\": %.6g, \"loss\": %.6g, "
            "\"policy_loss\": %.6g, \"value_loss\": %.6g, \"entropy\": %.6g, \"approx_kl\": %.6g, "
            "\"clipfrac\": %.6g, \"grad_norm\": %.6g, \"mean_reward\": %.6g, \"mean_episode_R\": %s, "
            "\"episodes\": %d, \"mean_value\": %.6g, \"explained_variance\": %.6g}\n",
            s->update, s->env_steps, s->seconds, s->lr, s->loss.loss, s->loss.policy, s->loss.value,
            s->loss.entropy, s->loss.approx_kl, s->loss.clipfrac, s->grad_norm, s->mean_reward,
            ep, s->episodes, s->mean_value, s->explained_var);
    fflush(f);
}

/* The whole flag list: model sizes, the training table, the rest. */
static void tensorboard(st_tboard *tb, const st_update_stats *s, const st_train_config *c) {
    const struct {
        const char *tag;
        double v;
    } rows[] = {
        {"loss/total", s->loss.loss},
        {"loss/policy", s->loss.policy},
        {"loss/value", s->loss.value},
        {"loss/entropy", s->loss.entropy},
        {"ppo/approx_kl", s->loss.approx_kl},
        {"ppo/clipfrac", s->loss.clipfrac},
        {"ppo/grad_norm", s->grad_norm},
        {"ppo/lr", s->lr},
        {"ppo/explained_variance", s->explained_var},
        {"env/mean_reward", s->mean_reward},
        {"env/mean_episode_R", s->mean_episode_R},
        {"env/episodes", s->episodes},
        {"perf/steps_per_second", (double)c->dims.T * c->dims.B / s->seconds},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (!isnan(rows[i].v)) st_tboard_scalar(tb, rows[i].tag, s->env_steps, rows[i].v);
    st_tboard_flush(tb);
}

static int save(const st_trainer *t, const char *out, int periodic) {
    char path[1200];
    if (periodic) {
        snprintf(path, sizeof path, "%s/checkpoints/ckpt_%06ld.safetensors", out, t->update);
        ST_TRY(st_checkpoint_save(path, t));
    }
    snprintf(path, sizeof path, "%s/last.safetensors", out);
    return st_checkpoint_save(path, t);
}

/* The tracer of a run: none when --trace is off and nothing is injected.
 * On the CPU the guard drives it; on the GPU the trainer does (the guard
 * then only carries the tracer and the host trainer for the dump). */
typedef struct {
    st_trace tr;
    st_trace_guard g;
    int on, gpu;
} run_trace;

static int trace_setup(const st_args *a, st_trainer *t, st_cuda_trainer *gt, run_trace *rt) {
    st_trace_mode mode;
    ST_TRY(st_trace_mode_parse(st_args_str(a, "trace", "off"), &mode));
    const char *inject = st_args_str(a, "inject", NULL);
    if (mode == ST_TRACE_OFF && !inject) return ST_OK;
    if (!gt) {
        ST_TRY(st_trace_for_trainer(&rt->tr, t, mode, inject));
        rt->on = 1;
        return st_trace_guard_init(&rt->g, &rt->tr, t);
    }
    st_label_sizes z;
    st_cuda_trainer_label_sizes(gt, &z);
    ST_TRY(st_trace_init(&rt->tr, mode, &z, &t->table, t->cfg.minibatches));
    rt->on = 1;
    rt->gpu = 1;
    if (inject && inject[0]) ST_TRY(st_trace_set_inject(&rt->tr, inject));
    memset(&rt->g, 0, sizeof rt->g);
    rt->g.tr = &rt->tr;
    rt->g.t = t;
    return st_cuda_trainer_set_trace(gt, &rt->tr);
}

static void trace_free(run_trace *rt) {
    if (!rt->on) return;
    if (!rt->gpu) st_trace_guard_free(&rt->g);
    st_trace_free(&rt->tr);
}

/* A trip: the report on stdout, the dump folder, one line for main. */
static int trace_trip(const st_args *a, run_trace *rt, const char *out, int rc) {
    st_trace_report(&rt->tr, stdout, 40);
    char dir[1200];
    snprintf(dir, sizeof dir, "%s", st_args_str(a, "trace-dump", NULL) ? st_args_str(a, "trace-dump", NULL) : "");
    if (!dir[0]) snprintf(dir, sizeof dir, "%s/trace_dump", out);
    int drc = st_trace_write_dump(&rt->g, dir);
    if (drc != ST_OK) return drc;
    printf("dump: %s (pre-step checkpoint, bad tensor and inputs; ssmtrade replay %s)\n", dir, dir);
    fflush(stdout);
    return rc; /* the guard's message (first label, step) stays the error main prints */
}

static int train(const st_args *a, st_train_config *cfg) {
    const char *out = st_args_str(a, "out", "runs/train");
    const char *resume = st_args_str(a, "resume", NULL);
    /* poisoned padding is a debug mode of the CPU backend: it picks the CPU unless told otherwise */
    const char *device =
        st_args_str(a, "device", st_cuda_devices() > 0 && !st_args_has(a, "poison-padding") ? "cuda" : "cpu");
    ST_REQUIRE(strcmp(device, "cpu") == 0 || strcmp(device, "cuda") == 0, ST_ERR_INPUT,
               "--device %s: expected cpu or cuda", device);
    int gpu = strcmp(device, "cuda") == 0;
    ST_REQUIRE(!gpu || !st_args_has(a, "poison-padding"), ST_ERR_INPUT,
               "--poison-padding is a debug mode of the cpu backend (the GPU's activations are contiguous): use "
               "--device cpu");
    ST_REQUIRE(!gpu || st_cuda_devices() > 0, ST_ERR_INPUT, "--device cuda: %s", st_cuda_describe());
    st_safetensors ck = {0};
    if (resume) {
        ST_TRY(st_safetensors_open(resume, &ck));
        int rc = st_checkpoint_config(&ck, cfg);
        cfg->stop_after = 0; /* belongs to the invocation that wrote the checkpoint */
        if (rc != ST_OK) {
            st_safetensors_close(&ck);
            return rc;
        }
    }
    int rc = st_run_apply_args(a, cfg);
    st_market m = {0};
    st_trainer cpu_t = {0};
    st_cuda_trainer gpu_t;
    memset(&gpu_t, 0, sizeof gpu_t);
    /* The GPU trainer keeps a host trainer (config, environments, counters,
     * host copies of the weights for checkpoints): t is that one or the CPU's. */
    st_trainer *t = gpu ? &gpu_t.host : &cpu_t;
    FILE *mf = NULL;
    st_tboard *tb = NULL;
    if (rc == ST_OK) rc = st_train_config_validate(cfg);
    if (rc == ST_OK) rc = st_run_market(cfg, &m, !st_args_has(a, "quiet"));
    int pad = st_args_has(a, "poison-padding") ? ST_TRACE_POISON_PAD : 0;
    if (rc == ST_OK) rc = gpu ? st_cuda_trainer_init(&gpu_t, cfg, &m) : st_trainer_init_padded(t, cfg, &m, pad);
    if (rc == ST_OK && resume) rc = st_checkpoint_restore(&ck, t);
    if (rc == ST_OK && resume && gpu) rc = st_cuda_trainer_push_host(&gpu_t);
    run_trace rt = {0};
    if (rc == ST_OK) rc = trace_setup(a, t, gpu ? &gpu_t : NULL, &rt);
    st_safetensors_close(&ck);
    char path[1200];
    if (rc == ST_OK) {
        snprintf(path, sizeof path, "%s/checkpoints", out);
        rc = mkdir_p(path);
    }
    if (rc == ST_OK) {
        snprintf(path, sizeof path, "%s/config.json", out);
        char *json = st_train_config_to_json(cfg);
        FILE *cf = fopen(path, "w");
        if (cf) fprintf(cf, "%s\n", json), fclose(cf);
        free(json);
        snprintf(path, sizeof path, "%s/metrics.jsonl", out);
        mf = fopen(path, resume ? "a" : "w");
        if (!mf) rc = ST_FAIL(ST_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    }
    if (rc == ST_OK) rc = st_tboard_open(out, &tb);
    int quiet = st_args_has(a, "quiet");
    if (rc == ST_OK && !quiet)
        printf("training: preset %s, %zu parameters, B=%d T=%d K=%d, %d updates from update %ld, run folder %s, "
               "trace %s%s%s\n",
               cfg->preset, t->table.total, cfg->dims.B, cfg->dims.T, cfg->dims.K, cfg->updates, t->update, out,
               st_args_str(a, "trace", "off"), pad ? ", poisoned padding" : "", rt.on && rt.tr.inject.armed ? ", injection armed" : "");
    if (rc == ST_OK && !quiet && gpu) printf("device: %s\n", st_cuda_describe());
    long first = t->update, todo = cfg->updates - t->update;
    if (cfg->stop_after > 0 && cfg->stop_after < todo) todo = cfg->stop_after;
    double elapsed = 0;
    for (long i = 0; rc == ST_OK && i < todo; i++) {
        st_update_stats s;
        rc = gpu ? st_cuda_trainer_update(&gpu_t, &s) : rt.on ? st_trace_guard_update(&rt.g, &s) : st_trainer_update(t, &s);
        if (rc == ST_ERR_NUMERIC && rt.on && rt.tr.tripped) {
            if (!quiet) progress_line(&s, cfg, st_trace_status(&rt.tr));
            /* the GPU trainer is back at its pre-step state on the device: the dump's checkpoint needs it on the host */
            int src = gpu ? st_cuda_trainer_sync_host(&gpu_t) : ST_OK;
            rc = src == ST_OK ? trace_trip(a, &rt, out, rc) : src;
        }
        if (rc != ST_OK) break;
        elapsed += s.seconds;
        metrics_jsonl(mf, &s);
        tensorboard(tb, &s, cfg);
        if (!quiet) progress_line(&s, cfg, st_trace_status(rt.on ? &rt.tr : NULL));
        if (!quiet) progress_bar(t->update - first, todo, elapsed);
        if (cfg->checkpoint_every > 0 && t->update % cfg->checkpoint_every == 0 && i + 1 < todo) {
            if (gpu) rc = st_cuda_trainer_sync_host(&gpu_t);
            if (rc == ST_OK) rc = save(t, out, 1);
        }
    }
    if (rc == ST_OK && gpu) rc = st_cuda_trainer_sync_host(&gpu_t);
    if (rc == ST_OK) rc = save(t, out, 1);
    if (rc == ST_OK && !quiet) printf("checkpoint: %s/last.safetensors (update %ld)\n", out, t->update);
    trace_free(&rt);
    if (mf) fclose(mf);
    if (tb) st_tboard_close(tb);
    if (gpu) st_cuda_trainer_free(&gpu_t);
    else st_trainer_free(&cpu_t);
    st_market_free(&m);
    return rc;
}

int st_cmd_train(int argc, char **argv) {
    return st_run_train_command(argc, argv, "train",
                                "Trains the agent with PPO. Without --data it uses the built-in synthetic market.",
                                extra_flags, N_EXTRA, train);
}
