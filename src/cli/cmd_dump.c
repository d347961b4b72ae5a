/* cmd_dump.c: `ssmtrade dump`: the inputs and every labelled activation
 * and gradient of one training step, as safetensors named by label
 * (DESIGN sections 10, 12): the first pass of each label (act and env:
 * rollout step 0; train, saved, bwd, grad, optim: epoch 0 minibatch 0).
 * From a fresh model (--seed) or a checkpoint (--ckpt, its next step). */
#include <stdio.h>
#include <stdlib.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/run_setup.h"
#include "core/error.h"
#include "trace/guard.h"
#include "trace/trace.h"
#include "train/checkpoint.h"

static const st_flag extra_flags[] = {
    ST_DIMS_FLAGS,
    {"out", "FILE", "the safetensors file to write (step_dump.safetensors)"},
    {"ckpt", "CKPT", "start from this checkpoint (its config, weights and environment state)"},
    {"poison-padding", NULL, "activation rows wider than their width, the gap a tagged NaN"},
    {"config", "FILE", "JSON file of flag values (flags win)"},
};
#define N_EXTRA (int)(sizeof extra_flags / sizeof extra_flags[0])

static int dump(const st_args *a, st_train_config *cfg) {
    const char *ckpt = st_args_str(a, "ckpt", NULL), *out = st_args_str(a, "out", "step_dump.safetensors");
    st_safetensors f = {0};
    if (ckpt) {
        ST_TRY(st_safetensors_open(ckpt, &f));
        st_train_config_free(cfg);
        int rc = st_checkpoint_config(&f, cfg);
        if (rc != ST_OK) {
            st_safetensors_close(&f);
            return rc;
        }
    }
    int rc = st_run_apply_args(a, cfg);
    if (rc == ST_OK) rc = st_train_config_validate(cfg);
    if (rc == ST_OK) { /* the data and the memory of the step, before any work */
        st_problems p = {.len = 0};
        st_run_check_data(cfg, &p);
        st_run_check_memory(cfg, 0, &p);
        rc = st_problems_report(&p, "dump");
    }
    st_market m = {0};
    st_trainer t = {0};
    if (rc == ST_OK) rc = st_run_market(cfg, &m, 1);
    int pad = st_args_has(a, "poison-padding") ? ST_TRACE_POISON_PAD : 0;
    if (rc == ST_OK) rc = st_trainer_init_padded(&t, cfg, &m, pad);
    if (rc == ST_OK && ckpt) rc = st_checkpoint_restore(&f, &t);
    if (ckpt) st_safetensors_close(&f);
    int n = 0;
    long step = t.update;
    if (rc == ST_OK) rc = st_trace_dump_step(&t, out, &n);
    if (rc == ST_OK) printf("dump: %s: %d labelled tensors of step %ld\n", out, n, step);
    st_trainer_free(&t);
    st_market_free(&m);
    return rc;
}

int st_cmd_dump(int argc, char **argv) {
    return st_run_train_command(argc, argv, "dump",
                                "Runs one training step with full NaN/Inf scans and writes every labelled tensor (inputs, "
                                "activations, saved state, gradients, optimiser state) to one safetensors file.",
                                extra_flags, N_EXTRA, dump);
}
