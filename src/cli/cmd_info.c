/* cmd_info.c: `ssmtrade info`: sizes, the parameter table and a memory
 * estimate for a preset (DESIGN section 12). */
#include <cjson/cJSON.h>
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/device.h"
#include "core/error.h"
#include "dist/dist.h"
#include "dist/launch.h"
#include "model/model.h"
#include "model/params.h"

static const st_flag flags[] = {
    ST_DIMS_FLAGS,
    {"json", NULL, "print machine-readable JSON"},
    {"config", "FILE", "JSON file of flag values (flags win)"},
};
#define N_FLAGS (int)(sizeof flags / sizeof flags[0])

/* This process's place in a multi-GPU run, as text ("rank 1 of 2, local
 * rank 1, started by mpirun"), or why the variables are wrong; NULL when it
 * is not a rank. */
static const char *rank_text(char *buf, size_t n) {
    st_rank_env r;
    int is_rank = 0;
    if (st_rank_from_env(&r, &is_rank) != ST_OK) {
        snprintf(buf, n, "not a rank: %s", st_last_error());
        st_clear_error();
        return buf;
    }
    if (!is_rank) return NULL;
    snprintf(buf, n, "rank %d of %d, local rank %d, started by %s", r.rank, r.world, r.local_rank,
             r.mpi ? "mpirun" : "ssmtrade train --gpus");
    return buf;
}

static void print_json(const st_dims *d, const st_param_table *t, size_t act_bytes) {
    cJSON *root = cJSON_CreateObject();
    cJSON *dims = cJSON_AddObjectToObject(root, "dims");
    const struct { const char *k; int v; } dv[] = {
        {"B", d->B}, {"K", d->K}, {"F", d->F}, {"C", d->C}, {"Dv", d->Dv}, {"D", d->D}, {"L", d->L},
        {"expand", d->expand}, {"headdim", d->headdim}, {"N", d->N}, {"G", d->G}, {"W", d->W},
        {"Q", d->Q}, {"Hh", d->Hh}, {"A", d->A}, {"T", d->T}, {"d_inner", st_d_inner(d)}, {"H", st_heads(d)},
    };
    for (size_t i = 0; i < sizeof dv / sizeof dv[0]; i++) cJSON_AddNumberToObject(dims, dv[i].k, dv[i].v);
    cJSON *ps = cJSON_AddArrayToObject(root, "parameters");
    for (int i = 0; i < t->n; i++) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "name", t->p[i].name);
        cJSON *sh = cJSON_AddArrayToObject(p, "shape");
        for (int k = 0; k < t->p[i].ndim; k++) cJSON_AddItemToArray(sh, cJSON_CreateNumber(t->p[i].shape[k]));
        cJSON_AddNumberToObject(p, "count", (double)t->p[i].count);
        cJSON_AddBoolToObject(p, "decay", t->p[i].decay);
        cJSON_AddItemToArray(ps, p);
    }
    cJSON_AddNumberToObject(root, "total_parameters", (double)t->total);
    cJSON_AddNumberToObject(root, "activation_bytes", (double)act_bytes);
    cJSON_AddNumberToObject(root, "cuda_devices", st_cuda_devices());
    cJSON_AddStringToObject(root, "device", st_cuda_describe());
    cJSON *mg = cJSON_AddObjectToObject(root, "multi_gpu");
    cJSON_AddBoolToObject(mg, "nccl", st_dist_available());
    cJSON_AddStringToObject(mg, "library", st_dist_describe());
    char buf[400];
    const char *rank = rank_text(buf, sizeof buf);
    if (rank) cJSON_AddStringToObject(mg, "this_process", rank);
    else cJSON_AddNullToObject(mg, "this_process");
    char *s = cJSON_Print(root);
    puts(s);
    cJSON_free(s);
    cJSON_Delete(root);
}

int st_cmd_info(int argc, char **argv) {
    st_args a;
    int rc = st_args_parse(argc, argv, flags, N_FLAGS, &a);
    if (rc == ST_OK && a.help) {
        st_args_usage(stdout, "info", "Prints the sizes, the parameter table (name, shape, count), a memory "
                                      "estimate, the CUDA device (JSON: cuda_devices) and multi-GPU support (NCCL; the process's rank "
                                      "under ssmtrade train --gpus or mpirun).", flags, N_FLAGS);
        st_args_free(&a);
        return 0;
    }
    st_dims d;
    if (rc == ST_OK) rc = st_args_dims(&a, "default", &d);
    st_param_table t = {0};
    if (rc == ST_OK) rc = st_param_table_build(&d, &t);
    if (rc != ST_OK) {
        st_args_free(&a);
        return rc;
    }
    /* Training forward over a rollout's worth of windows is the peak; the
     * estimate counts the float32 activation arena for B windows. */
    size_t act = st_model_activation_bytes(&d, d.B);
    if (st_args_has(&a, "json")) {
        print_json(&d, &t, act);
    } else {
        printf("preset %s: B=%d K=%d F=%d C=%d Dv=%d D=%d L=%d expand=%d headdim=%d (H=%d, d_inner=%d) N=%d G=%d "
               "W=%d Q=%d Hh=%d A=%d T=%d\n\n",
               st_args_str(&a, "preset", "default"), d.B, d.K, d.F, d.C, d.Dv, d.D, d.L, d.expand, d.headdim,
               st_heads(&d), st_d_inner(&d), d.N, d.G, d.W, d.Q, d.Hh, d.A, d.T);
        printf("%-28s %-16s %10s  %s\n", "name", "shape", "count", "decay");
        for (int i = 0; i < t.n; i++) {
            char shape[48];
            st_param_shape_str(&t.p[i], shape, sizeof shape);
            printf("%-28s %-16s %10zu  %s\n", t.p[i].name, shape, t.p[i].count, t.p[i].decay ? "yes" : "no");
        }
        printf("%-28s %-16s %10zu\n\n", "total", "", t.total);
        double mb = 1.0 / (1 << 20);
        printf("memory: parameters %.2f MiB, + gradients, AdamW m and v: %.2f MiB in all (float32)\n",
               (double)t.total * 4 * mb, (double)t.total * 16 * mb);
        printf("        activations of one forward/backward over B=%d windows of K=%d: %.1f MiB\n", d.B, d.K,
               (double)act * mb);
        printf("device: %s\n", st_cuda_describe());
        char buf[400];
        const char *rank = rank_text(buf, sizeof buf);
        printf("multi-GPU: %s%s%s\n", st_dist_describe(), rank ? "; this process: " : "", rank ? rank : "");
    }
    st_param_table_free(&t);
    st_args_free(&a);
    return 0;
}
