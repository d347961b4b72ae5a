/* bench_e2e.c: full PPO updates through the GPU trainer, env steps per
 * second (cli/bench.h). */
#include "cli/bench.h"

#ifdef ST_HAVE_CUDA
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench_gpu.h"
#include "core/error.h"
#include "cuda/linear_cuda.h"
#include "train/train_config.h"
#include "train/trainer_cuda.h"

/* ======================================================================= */
/* e2e: full PPO through the GPU trainer                                   */

int st_bench_e2e(const st_bench_opts *o, cJSON *out) {
    cJSON *arr = cJSON_AddArrayToObject(out, "e2e");
    printf("\n== e2e: full PPO updates (st_cuda_trainer_update), T=%d, %d epochs, minibatches of %d windows\n"
           "   (segments of %d steps of one environment);\n"
           "   one warm-up update, then the median of %d timed updates (wall clock, device synchronised)\n",
           o->e2e_rollout, o->e2e_epochs, o->e2e_minibatch, o->segment, o->e2e_updates);
    printf("  %7s %5s %11s %13s %9s %9s\n", "envs", "prec", "update s", "env steps/s", "used GiB", "loss");
    fflush(stdout);
    int failed = 0;
    for (int i = 0; i < o->e2e_envs.n; i++) {
        int B = o->e2e_envs.v[i];
        for (int k = 0; k < o->precision.n; k++) {
            int p = o->precision.v[k];
            cJSON *row = st_bench_row(arr, "envs", B, p);
            cJSON_AddNumberToObject(row, "T", o->e2e_rollout);
            cJSON_AddNumberToObject(row, "epochs", o->e2e_epochs);
            char what[64];
            snprintf(what, sizeof what, "e2e %d envs %s", B, st_bench_precision_name(p));
            long long N = (long long)o->e2e_rollout * B;
            int M = (int)(N / o->e2e_minibatch);
            st_train_config cfg;
            memset(&cfg, 0, sizeof cfg);
            int r = st_train_config_default(&cfg, o->preset);
            if (r == ST_OK && (M < 1 || N % o->e2e_minibatch != 0))
                r = ST_FAIL(ST_ERR_INPUT, "T*B = %lld is not a multiple of --e2e-minibatch %d", N, o->e2e_minibatch);
            if (r == ST_OK) {
                cfg.dims = o->d;
                cfg.dims.B = B;
                cfg.dims.T = o->e2e_rollout;
                cfg.epochs = o->e2e_epochs;
                cfg.minibatches = M;
                cfg.segment = o->segment;
                cfg.updates = 1 + o->e2e_updates + 100; /* the schedule's horizon: no decay to zero here */
                cfg.seed = (long long)o->seed;
                /* the trainer sets the matrix-product precision of its graphs from its config */
                r = st_train_config_set(&cfg, "precision", st_bench_precision_name(p));
                cJSON_AddNumberToObject(row, "minibatches", M);
                cJSON_AddNumberToObject(row, "minibatch", o->e2e_minibatch);
                cJSON_AddNumberToObject(row, "segment", o->segment);
            }
            st_cuda_trainer t;
            memset(&t, 0, sizeof t);
            size_t free0 = st_bench_mem_free(), free1 = free0;
            double *sec = calloc((size_t)o->e2e_updates, sizeof *sec);
            st_update_stats us;
            memset(&us, 0, sizeof us);
            st_cuda_set_matmul_precision((st_matmul_precision)p);
            if (r == ST_OK && !sec) r = ST_FAIL(ST_ERR_MEMORY, "no memory");
            int inited = 0;
            if (r == ST_OK) {
                r = st_cuda_trainer_init(&t, &cfg, o->market);
                inited = 1; /* free even after a failed init: it frees what was made */
            }
            if (r == ST_OK) r = st_cuda_trainer_update(&t, &us); /* warm-up (graph capture, cuBLAS plans) */
            if (r == ST_OK) r = CUS(cudaDeviceSynchronize());
            free1 = st_bench_mem_free();
            for (int u = 0; u < o->e2e_updates && r == ST_OK; u++) {
                double t0 = st_bench_now();
                r = st_cuda_trainer_update(&t, &us);
                if (r == ST_OK) r = CUS(cudaDeviceSynchronize());
                sec[u] = st_bench_now() - t0;
            }
            st_cuda_set_matmul_precision(ST_MATMUL_FP32);
            if (inited) st_cuda_trainer_free(&t);
            if (r == ST_OK) {
                st_bench_times tm = st_bench_summarize(sec, o->e2e_updates);
                double used = free0 > free1 ? (double)(free0 - free1) : 0;
                cJSON_AddNumberToObject(row, "update_s_median", tm.median);
                cJSON_AddNumberToObject(row, "update_s_p10", tm.p10);
                cJSON_AddNumberToObject(row, "update_s_p90", tm.p90);
                cJSON_AddNumberToObject(row, "updates_timed", tm.count);
                cJSON_AddNumberToObject(row, "env_steps_per_s", (double)N / tm.median);
                cJSON_AddNumberToObject(row, "memgetinfo_delta_bytes", used);
                cJSON_AddNumberToObject(row, "loss", us.loss.loss);
                cJSON_AddNumberToObject(row, "entropy", us.loss.entropy);
                printf("  %7d %5s %11.3f %13.4g %9.2f %9.4f\n", B, st_bench_precision_name(p), tm.median,
                       (double)N / tm.median, st_bench_gib(used), us.loss.loss);
                fflush(stdout);
            } else {
                st_bench_record_error(row, what);
                failed++;
            }
            free(sec);
            st_train_config_free(&cfg);
        }
    }
    return failed;
}

#endif
