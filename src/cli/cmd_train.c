/* cmd_train.c: `ssmtrade train`: PPO on the built-in synthetic market or
 * on CSV data, with checkpoints, a metrics file and progress lines
 * (DESIGN sections 6, 10, 12). Every hyper-parameter is a flag and a key of
 * the JSON --config file (train/train_config.h); flags win.
 * The NaN/Inf tracer (--trace, --inject, --poison-padding; trace/guard.h)
 * wraps each update; on a trip the run stops with the report and a dump.
 *
 * Before any work: every flag, config key, the --resume checkpoint (whole,
 * and that the flags keep its sizes and data), the run folder and the
 * memory the trainer needs are checked, and all problems are printed, one
 * line each (cli/run_setup.h).
 *
 * SIGINT / SIGTERM: the handler only sets a flag; the loop looks at it
 * after each update, writes the checkpoints (periodic and last), says
 * "interrupted by SIGINT after update N: ..." and exits 130 (SIGTERM: 143).
 * A signal during the write changes nothing: the write goes on. A signal
 * before the loop starts (loading, building) ends the process as usual:
 * nothing is lost that a checkpoint holds.
 *
 * SIGKILL: checkpoints are written to a temp file beside the target, fsynced
 * and renamed (core/safetensors.c), so every *.safetensors file is whole at
 * any moment; a killed write leaves NAME.safetensors.tmp.PID, removed by the
 * next run into the folder once that process is gone. On --resume the
 * metrics file is cut back to the checkpoint's update (a kill between the
 * metrics line and the checkpoint leaves lines of an update that is redone).
 *
 * --gpus N (N > 1, issue 8): after every check above this process becomes
 * the launcher of dist/launch.h, which starts N ranks of the same command;
 * a rank (SSMTRADE_RANK or mpirun's OMPI_COMM_WORLD_RANK in its
 * environment) joins the NCCL communicator on its GPU and trains its slice
 * (train/trainer_cuda.h, st_cuda_trainer_init_dist). Only rank 0 prints
 * progress and writes the run folder; every rank takes part in the
 * collectives of each update, of each checkpoint (the environments are
 * gathered) and of the stop decision after each update (a signal that
 * reached only some ranks stops all of them after the same update).
 *
 * Test hook: SSMTRADE_TEST_SLOW_CHECKPOINT_MS=N sleeps N ms before each
 * checkpoint file is written, to widen the window a test's signals aim at
 * (tests/cli/test_sigkill.sh, test_signals.sh). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/run_setup.h"
#include "core/device.h"
#include "core/error.h"
#include "core/file.h"
#include "dist/dist.h"
#include "dist/launch.h"
#include "report/tboard.h"
#include "trace/guard.h"
#include "trace/trace.h"
#include "train/checkpoint.h"
#include "train/trainer.h"
#include "train/trainer_cuda.h"
#include "train/trainer_cuda_dist.h"

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
    {"gpus", "N", "data-parallel training on N GPUs of this host: one process per GPU, NCCL; B and the minibatch "
                  "split over them (1)"},
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

/* The test hook SSMTRADE_TEST_SLOW_CHECKPOINT_MS (top of the file). */
static void test_slow_checkpoint(void) {
    const char *v = getenv("SSMTRADE_TEST_SLOW_CHECKPOINT_MS");
    long ms = v ? atol(v) : 0;
    if (ms <= 0) return;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* The checkpoints of update t->update. A rank told that a peer failed
 * (dist/launch.h) leaves only after the writes. */
static int save(const st_trainer *t, const char *out, int periodic) {
    char path[1200];
    int rc = ST_OK;
    st_rank_defer_peers(1);
    if (periodic) {
        test_slow_checkpoint();
        snprintf(path, sizeof path, "%s/checkpoints/ckpt_%06ld.safetensors", out, t->update);
        rc = st_checkpoint_save(path, t);
    }
    if (rc == ST_OK) {
        test_slow_checkpoint();
        snprintf(path, sizeof path, "%s/last.safetensors", out);
        rc = st_checkpoint_save(path, t);
    }
    st_rank_defer_peers(0);
    return rc;
}

/* Removes the NAME.tmp.PID files a killed writer left in dir (NAME a
 * checkpoint, config.json or metrics.jsonl; PID a process that is gone);
 * returns how many. */
static int remove_stale_temps(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    for (struct dirent *e = readdir(d); e; e = readdir(d)) {
        const char *at = strstr(e->d_name, ".tmp.");
        if (!at) continue;
        size_t n = (size_t)(at - e->d_name);
        int ours = (n > 12 && strncmp(at - 12, ".safetensors", 12) == 0) ||
                   (n == 11 && strncmp(e->d_name, "config.json", 11) == 0) ||
                   (n == 13 && strncmp(e->d_name, "metrics.jsonl", 13) == 0);
        if (!ours) continue;
        char *end;
        long pid = strtol(at + 5, &end, 10);
        if (end == at + 5 || *end != 0 || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* its writer may still be at work */
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        removed += unlink(path) == 0;
    }
    closedir(d);
    return removed;
}

/* Cuts metrics.jsonl back to the lines of updates <= update (and drops a
 * torn last line): what a killed run wrote past its last checkpoint is
 * redone by the resumed one. Rewritten atomically; returns the lines dropped. */
static int trim_metrics(const char *path, long update, int *dropped) {
    *dropped = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return ST_OK; /* nothing yet */
    size_t sz;
    char *buf = st_read_all(f, &sz);
    fclose(f);
    ST_REQUIRE(buf, ST_ERR_IO, "cannot read %s", path);
    size_t keep = 0; /* bytes kept, moved to the front */
    for (size_t i = 0; i < sz;) {
        char *nl = memchr(buf + i, '\n', sz - i);
        if (!nl) {
            (*dropped)++; /* a torn line */
            break;
        }
        size_t n = (size_t)(nl - (buf + i)) + 1;
        *nl = 0;
        const char *u = strstr(buf + i, "\"update\": ");
        int ok = !u || atol(u + 10) <= update;
        *nl = '\n';
        if (ok) {
            memmove(buf + keep, buf + i, n);
            keep += n;
        } else {
            (*dropped)++;
        }
        i += n;
    }
    int rc = ST_OK;
    if (*dropped) {
        buf[keep] = 0;
        rc = st_write_file_atomic(path, buf, keep);
    }
    free(buf);
    return rc;
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

/* A trip: the report on stdout, the dump folder, one line for main; rank:
 * this process's rank of a multi-GPU run (-1: none). */
static int trace_trip(const st_args *a, run_trace *rt, const char *out, int rc, int rank) {
    if (rank >= 0) printf("-- rank %d:\n", rank);
    st_trace_report(&rt->tr, stdout, 40);
    char dir[1200];
    snprintf(dir, sizeof dir, "%s", st_args_str(a, "trace-dump", NULL) ? st_args_str(a, "trace-dump", NULL) : "");
    if (!dir[0]) snprintf(dir, sizeof dir, "%s/trace_dump", out);
    if (rank > 0) { /* each rank's own dump: rank 0's at DIR, rank r's at DIR_rank<r> */
        size_t n = strlen(dir);
        snprintf(dir + n, sizeof dir - n, "_rank%d", rank);
    }
    int drc = st_trace_write_dump(&rt->g, dir);
    if (drc != ST_OK) return drc;
    printf("dump: %s (pre-step checkpoint, bad tensor and inputs; ssmtrade replay %s)\n", dir, dir);
    fflush(stdout);
    return rc; /* the guard's message (first label, step) stays the error main prints */
}

/* Every tensor of f lies inside the file: a truncated checkpoint is found
 * here, before anything is built. */
static int check_whole(const st_safetensors *f) {
    for (const cJSON *it = ((const cJSON *)f->json)->child; it; it = it->next) {
        if (!it->string || strcmp(it->string, "__metadata__") == 0) continue;
        st_dtype dt;
        int nd;
        int64_t sh[4];
        const void *data;
        size_t bytes;
        ST_TRY(st_safetensors_find(f, it->string, &dt, &nd, sh, &data, &bytes));
    }
    return ST_OK;
}

/* "key a -> b" for each key of which the two configs (JSON) differ; keys:
 * the model sizes (want_sizes: every key that is not a training parameter)
 * or the data's. Returns how many. */
static int config_changes(const cJSON *was, const cJSON *now, int want_sizes, char *buf, size_t size) {
    static const char *const data_keys[] = {"data", "instruments", "bars", "market-seed"};
    int n = 0;
    buf[0] = 0;
    for (const cJSON *it = now->child; it; it = it->next) {
        int is_param = 0, is_data = 0;
        for (int i = 0; i < st_train_param_count(); i++) is_param |= strcmp(it->string, st_train_param_flag(i)) == 0;
        for (size_t i = 0; i < sizeof data_keys / sizeof data_keys[0]; i++)
            is_data |= strcmp(it->string, data_keys[i]) == 0;
        if (want_sizes ? is_param || strcmp(it->string, "preset") == 0 : !is_data) continue;
        const cJSON *old = cJSON_GetObjectItemCaseSensitive(was, it->string);
        char a[96], b[96];
        if (cJSON_IsNumber(it)) snprintf(b, sizeof b, "%.17g", it->valuedouble);
        else snprintf(b, sizeof b, "'%s'", cJSON_IsString(it) ? it->valuestring : "?");
        if (cJSON_IsNumber(old)) snprintf(a, sizeof a, "%.17g", old->valuedouble);
        else if (cJSON_IsString(old)) snprintf(a, sizeof a, "'%s'", old->valuestring);
        else snprintf(a, sizeof a, "(none)");
        if (strcmp(a, b) == 0) continue;
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s %s -> %s", n ? ", " : "", it->string, a, b);
        n++;
    }
    return n;
}

/* --resume keeps the checkpoint's model sizes and data: flags that change
 * them are problems (the restore would fail later, or silently differ). */
static void check_resume_flags(const char *resume, const char *ckpt_json, const st_train_config *cfg,
                               st_problems *p) {
    char *now_json = st_train_config_to_json(cfg);
    cJSON *was = cJSON_Parse(ckpt_json), *now = now_json ? cJSON_Parse(now_json) : NULL;
    free(now_json);
    if (was && now) {
        char list[600];
        const cJSON *pw = cJSON_GetObjectItemCaseSensitive(was, "preset");
        if (config_changes(was, now, 1, list, sizeof list) > 0)
            ST_PROBLEM(p,
                       "--resume %s: the flags change the checkpoint's model sizes (%s; its preset is %s): a resumed "
                       "run keeps the sizes it was trained with",
                       resume, list, cJSON_IsString(pw) ? pw->valuestring : "?");
        if (config_changes(was, now, 0, list, sizeof list) > 0)
            ST_PROBLEM(p, "--resume %s: the flags change the checkpoint's data (%s): a resumed run needs the data it "
                          "was trained on", resume, list);
    }
    cJSON_Delete(was);
    cJSON_Delete(now);
}

/* --out must be a folder we can write, or one we can create. */
static void check_out(const char *out, st_problems *p) {
    struct stat sb;
    if (stat(out, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode)) ST_PROBLEM(p, "--out %s exists and is not a folder", out);
        else if (access(out, W_OK | X_OK) != 0)
            ST_PROBLEM(p, "--out %s: cannot write into it: %s", out, strerror(errno));
        return;
    }
    char up[1200];
    snprintf(up, sizeof up, "%s", out);
    for (;;) {
        char *slash = strrchr(up, '/');
        if (!slash) snprintf(up, sizeof up, ".");
        else if (slash == up) up[1] = 0;
        else *slash = 0;
        if (stat(up, &sb) == 0) {
            if (!S_ISDIR(sb.st_mode)) ST_PROBLEM(p, "--out %s: %s is not a folder", out, up);
            else if (access(up, W_OK | X_OK) != 0)
                ST_PROBLEM(p, "--out %s: cannot create it in %s: %s", out, up, strerror(errno));
            return;
        }
        if (!slash || slash == up) return;
    }
}

/* Everything checkable before work starts, each problem into p; cfg gets
 * the checkpoint's config (when resuming) and the flags. *ck is left open
 * for the restore when there is no problem. */
static void check_run(const st_args *a, st_train_config *cfg, int gpu, st_safetensors *ck, st_problems *p) {
    const char *device = st_args_str(a, "device", NULL), *resume = st_args_str(a, "resume", NULL);
    if (device && strcmp(device, "cpu") != 0 && strcmp(device, "cuda") != 0)
        ST_PROBLEM(p, "--device %s: expected cpu or cuda", device);
    if (gpu && st_args_has(a, "poison-padding"))
        ST_PROBLEM(p, "--poison-padding is a debug mode of the cpu backend (the GPU's activations are contiguous): "
                      "use --device cpu");
    else if (gpu && st_cuda_devices() == 0)
        ST_PROBLEM(p, "--device cuda: %s", st_cuda_describe());
    st_trace_mode mode;
    st_problems_take(p, st_trace_mode_parse(st_args_str(a, "trace", "off"), &mode));
    char *ckpt_json = NULL;
    if (resume) {
        struct stat sb;
        if (stat(resume, &sb) != 0) {
            ST_PROBLEM(p, "--resume %s: %s", resume, strerror(errno));
        } else if (st_problems_take(p, st_safetensors_open(resume, ck)) == ST_OK &&
                   st_problems_take(p, check_whole(ck)) == ST_OK) {
            st_train_config_free(cfg); /* st_checkpoint_config starts from fresh defaults */
            if (st_problems_take(p, st_checkpoint_config(ck, cfg)) == ST_OK) {
                ckpt_json = st_train_config_to_json(cfg);
            } else { /* the flags are still checked, on the tiny preset */
                st_train_config_free(cfg);
                st_train_config_default(cfg, "tiny");
            }
        }
        cfg->stop_after = 0; /* belongs to the invocation that wrote the checkpoint */
    }
    st_problems_take(p, st_run_apply_args(a, cfg));
    if (ckpt_json) check_resume_flags(resume, ckpt_json, cfg, p);
    free(ckpt_json);
    const char *inject = st_args_str(a, "inject", NULL); /* its label is looked up once the run's sizes exist */
    if (inject && inject[0]) st_problems_take(p, st_trace_check_inject(inject));
    int cfg_ok = st_problems_take(p, st_train_config_validate(cfg)) == ST_OK;
    st_run_check_data(cfg, p);
    check_out(st_args_str(a, "out", "runs/train"), p);
    int gpus = 1;
    st_problems_take(p, st_args_int(a, "gpus", 1, &gpus));
    if (gpus < 1 || gpus > 1024) {
        ST_PROBLEM(p, "--gpus %d: expected 1 to 1024", gpus);
    } else if (gpus > 1) {
        st_dist split = {.world = gpus};
        if (!gpu) ST_PROBLEM(p, "--gpus %d: multi-GPU training runs on the CUDA backend (--device cuda)", gpus);
        else if (!st_dist_available()) ST_PROBLEM(p, "--gpus %d: %s", gpus, st_dist_describe());
        else if (st_cuda_devices() < gpus && !getenv("OMPI_COMM_WORLD_RANK")) /* mpirun: over several hosts */
            ST_PROBLEM(p, "--gpus %d: this host has %d GPU(s)", gpus, st_cuda_devices());
        if (cfg_ok) st_problems_take(p, st_cuda_dist_check(cfg, &split));
    }
    if (p->n == 0 && p->hidden == 0 && cfg_ok) st_run_check_memory(cfg, gpu, p);
}

static volatile sig_atomic_t stop_signal; /* the first SIGINT / SIGTERM, 0 while none */

static void on_stop_signal(int sig) {
    if (!stop_signal) stop_signal = sig;
}

static void catch_stop_signals(struct sigaction old[2]) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    stop_signal = 0;
    sigaction(SIGINT, &sa, &old[0]);
    sigaction(SIGTERM, &sa, &old[1]);
}

static void release_stop_signals(const struct sigaction old[2]) {
    sigaction(SIGINT, &old[0], NULL);
    sigaction(SIGTERM, &old[1], NULL);
}

/* main's argv (the launcher starts the ranks with the same arguments) */
static char **launch_argv;

static int train(const st_args *a, st_train_config *cfg, st_problems *problems) {
    const char *out = st_args_str(a, "out", "runs/train");
    const char *resume = st_args_str(a, "resume", NULL);
    /* poisoned padding is a debug mode of the CPU backend: it picks the CPU unless told otherwise */
    const char *device =
        st_args_str(a, "device", st_cuda_devices() > 0 && !st_args_has(a, "poison-padding") ? "cuda" : "cpu");
    int gpu = strcmp(device, "cuda") == 0, quiet = st_args_has(a, "quiet");
    st_safetensors ck = {0};
    check_run(a, cfg, gpu, &ck, problems);
    st_rank_env re;
    int is_rank = 0, gpus = 1;
    st_args_int(a, "gpus", 1, &gpus); /* checked by check_run */
    st_problems_take(problems, st_rank_from_env(&re, &is_rank));
    if (is_rank && re.world == 1 && gpus == 1) is_rank = 0; /* mpirun -np 1: a plain one-GPU run */
    if (is_rank && re.world != gpus)
        ST_PROBLEM(problems, "this process is rank %d of %d (%s) but --gpus is %d: pass --gpus %d", re.rank, re.world,
                   re.mpi ? "mpirun" : "SSMTRADE_WORLD", gpus, re.world);
    if (problems->n || problems->hidden) {
        st_safetensors_close(&ck);
        return st_problems_report(problems, "train");
    }
    if (gpus > 1 && !is_rank) { /* the launcher: every check above passed; the ranks do the work */
        st_safetensors_close(&ck);
        if (!quiet)
            printf("training on %d GPUs: %d processes of this program, one per GPU (rank 0 prints and writes %s)\n",
                   gpus, gpus, out);
        fflush(stdout);
        st_clear_error();
        char hex[ST_DIST_ID_HEX];
        return st_dist_new_id(hex) == ST_OK ? st_launch_ranks(gpus, launch_argv, hex) : 1;
    }
    /* a rank: its GPU and the communicator; only rank 0 prints and writes files */
    st_dist dist = {0};
    int dist_on = 0, writer = !is_rank || re.rank == 0, rc = ST_OK;
    if (is_rank) {
        char hex[ST_DIST_ID_HEX];
        rc = st_cuda_use_device(re.local_rank);
        if (rc == ST_OK && !re.id_hex) { /* mpirun: every rank derives the id from NCCL_COMM_ID */
            rc = getenv("NCCL_COMM_ID") ? st_dist_new_id(hex)
                                        : ST_FAIL(ST_ERR_INPUT, "under mpirun, set NCCL_COMM_ID=<host of rank 0>:<free "
                                                                "port> for every rank (mpirun -x NCCL_COMM_ID=...)");
            re.id_hex = hex;
        }
        if (rc == ST_OK) st_rank_watch_peers(re.rank, re.world); /* the launcher's word that a peer failed */
        if (rc == ST_OK) rc = st_dist_init(&dist, re.rank, re.world, re.id_hex);
        dist_on = rc == ST_OK;
    }
    quiet = quiet || !writer;
    st_market m = {0};
    st_trainer cpu_t = {0};
    st_cuda_trainer gpu_t;
    memset(&gpu_t, 0, sizeof gpu_t);
    /* The GPU trainer keeps a host trainer (config, environments, counters,
     * host copies of the weights for checkpoints): t is that one or the CPU's. */
    st_trainer *t = gpu ? &gpu_t.host : &cpu_t;
    FILE *mf = NULL;
    st_tboard *tb = NULL;
    if (rc == ST_OK) rc = st_run_market(cfg, &m, !quiet);
    if (rc == ST_OK) {
        st_run_check_market(cfg, &m, problems);
        if (problems->n) rc = st_problems_report(problems, "train");
    }
    int pad = st_args_has(a, "poison-padding") ? ST_TRACE_POISON_PAD : 0;
    if (rc == ST_OK)
        rc = gpu ? st_cuda_trainer_init_dist(&gpu_t, cfg, &m, dist_on ? &dist : NULL)
                 : st_trainer_init_padded(t, cfg, &m, pad);
    if (rc == ST_OK && resume) rc = st_checkpoint_restore(&ck, t);
    if (rc == ST_OK && resume && gpu) rc = st_cuda_trainer_push_host(&gpu_t);
    run_trace rt = {0};
    if (rc == ST_OK) rc = trace_setup(a, t, gpu ? &gpu_t : NULL, &rt);
    st_safetensors_close(&ck);
    char path[1200];
    if (rc == ST_OK && writer) {
        snprintf(path, sizeof path, "%s/checkpoints", out);
        rc = mkdir_p(path);
    }
    if (rc == ST_OK && writer) {
        int stale = remove_stale_temps(out);
        stale += remove_stale_temps(path);
        if (stale && !quiet) printf("removed %d temporary file(s) of a killed checkpoint write in %s\n", stale, out);
    }
    if (rc == ST_OK && writer) {
        snprintf(path, sizeof path, "%s/config.json", out);
        char *json = st_train_config_to_json(cfg);
        size_t n = json ? strlen(json) : 0;
        char *text = json ? malloc(n + 2) : NULL;
        if (text) memcpy(text, json, n), memcpy(text + n, "\n", 2);
        rc = text ? st_write_file_atomic(path, text, strlen(text)) : ST_FAIL(ST_ERR_MEMORY, "out of memory");
        free(text);
        free(json);
    }
    if (rc == ST_OK && writer) {
        snprintf(path, sizeof path, "%s/metrics.jsonl", out);
        int dropped = 0;
        if (resume) rc = trim_metrics(path, t->update, &dropped);
        if (dropped && !quiet)
            printf("metrics.jsonl: dropped %d line(s) past the checkpoint's update %ld (written before the run was "
                   "stopped; redone now)\n", dropped, t->update);
        mf = rc == ST_OK ? fopen(path, resume ? "a" : "w") : NULL;
        if (rc == ST_OK && !mf) rc = ST_FAIL(ST_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    }
    if (rc == ST_OK && writer) rc = st_tboard_open(out, &tb);
    if (rc == ST_OK && !quiet)
        printf("training: preset %s, %zu parameters, B=%d T=%d K=%d, %d updates from update %ld, run folder %s, "
               "trace %s%s%s\n",
               cfg->preset, t->table.total, cfg->dims.B, cfg->dims.T, cfg->dims.K, cfg->updates, t->update, out,
               st_args_str(a, "trace", "off"), pad ? ", poisoned padding" : "", rt.on && rt.tr.inject.armed ? ", injection armed" : "");
    if (rc == ST_OK && !quiet && gpu) printf("device: %s\n", st_cuda_describe());
    if (rc == ST_OK && !quiet && dist_on)
        printf("data parallel: %d ranks (%s), B/%d = %d environments and minibatch/%d = %d windows each\n",
               dist.world, st_dist_describe(), dist.world, gpu_t.Bl, dist.world, gpu_t.ml);
    fflush(stdout);
    long first = t->update, todo = cfg->updates - t->update;
    if (cfg->stop_after > 0 && cfg->stop_after < todo) todo = cfg->stop_after;
    double elapsed = 0;
    long saved = -1; /* the update of the last checkpoint written */
    struct sigaction old_handlers[2];
    catch_stop_signals(old_handlers);
    int stop = stop_signal; /* the signal the run stops on; the ranks agree on it after every update */
    for (long i = 0; rc == ST_OK && i < todo && !stop; i++) {
        st_update_stats s;
        rc = gpu ? st_cuda_trainer_update(&gpu_t, &s) : rt.on ? st_trace_guard_update(&rt.g, &s) : st_trainer_update(t, &s);
        if (rc == ST_ERR_NUMERIC && rt.on && rt.tr.tripped) {
            if (!quiet) progress_line(&s, cfg, st_trace_status(&rt.tr));
            /* the GPU trainer is back at its pre-step state on the device: the dump's checkpoint needs it on the host */
            int src = gpu ? st_cuda_trainer_sync_host(&gpu_t) : ST_OK;
            rc = src == ST_OK ? trace_trip(a, &rt, out, rc, is_rank ? re.rank : -1) : src;
        }
        if (rc != ST_OK) break;
        elapsed += s.seconds;
        if (mf) metrics_jsonl(mf, &s);
        if (tb) tensorboard(tb, &s, cfg);
        if (!quiet) progress_line(&s, cfg, st_trace_status(rt.on ? &rt.tr : NULL));
        if (!quiet) progress_bar(t->update - first, todo, elapsed);
        stop = stop_signal;
        if (dist_on) { /* a signal may have reached some ranks only: all stop, or none */
            int any = 0;
            rc = st_cuda_trainer_any(&gpu_t, stop != 0, &any);
            if (rc != ST_OK) break;
            if (any && !stop) stop = SIGTERM;
        }
        /* after a stop signal the checkpoint below is the one */
        if (!stop && cfg->checkpoint_every > 0 && t->update % cfg->checkpoint_every == 0 && i + 1 < todo) {
            if (gpu) rc = st_cuda_trainer_sync_host(&gpu_t); /* with ranks: every rank, a collective */
            if (rc == ST_OK && writer) rc = save(t, out, 1);
            if (rc == ST_OK) saved = t->update;
        }
    }
    if (rc == ST_OK && stop && !quiet) {
        printf("stopping on %s after update %ld%s\n", stop == SIGINT ? "SIGINT" : "SIGTERM", t->update,
               saved == t->update ? " (its checkpoint is written)" : ": writing the checkpoint");
        fflush(stdout);
    }
    if (rc == ST_OK && saved != t->update && gpu) rc = st_cuda_trainer_sync_host(&gpu_t);
    if (rc == ST_OK && saved != t->update && writer) rc = save(t, out, 1);
    release_stop_signals(old_handlers); /* a signal during the write above only set the flag */
    if (!stop) stop = stop_signal;
    if (rc == ST_OK && stop) {
        const char *name = stop == SIGINT ? "SIGINT" : "SIGTERM";
        if (!quiet && isatty(fileno(stderr))) fputc('\n', stderr); /* after the progress bar */
        fprintf(stderr,
                "ssmtrade train: interrupted by %s after update %ld: checkpoint %s/last.safetensors (resume with "
                "--resume %s/last.safetensors)\n",
                name, t->update, out, out);
        fflush(stderr);
        st_clear_error();
        rc = 128 + (stop == SIGINT ? SIGINT : SIGTERM);
    } else if (rc == ST_OK && !quiet) {
        printf("checkpoint: %s/last.safetensors (update %ld)\n", out, t->update);
    }
    trace_free(&rt);
    if (mf) fclose(mf);
    if (tb) st_tboard_close(tb);
    if (gpu) st_cuda_trainer_free(&gpu_t);
    else st_trainer_free(&cpu_t);
    st_market_free(&m);
    if (dist_on && rc == ST_OK) st_dist_free(&dist);
    else if (dist_on) st_dist_abort(&dist); /* the peers may be gone */
    if (is_rank && rc != ST_OK && rc < 128 && !strstr(st_last_error(), "rank ")) {
        char why[700];
        snprintf(why, sizeof why, "%s", st_last_error());
        st_clear_error();
        rc = ST_FAIL(rc, "rank %d of %d: %s", re.rank, re.world, why);
    }
    return rc;
}

int st_cmd_train(int argc, char **argv) {
    launch_argv = argv - 1; /* main passes its own argv + 1: argv[-1] is the program */
    return st_run_train_command_checked(argc, argv, "train",
                                        "Trains the agent with PPO. Without --data it uses the built-in synthetic "
                                        "market. SIGINT or SIGTERM: the current update ends, the checkpoint is "
                                        "written, exit status 130 / 143.",
                                        extra_flags, N_EXTRA, train);
}
