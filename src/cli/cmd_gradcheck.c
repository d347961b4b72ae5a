/* cmd_gradcheck.c: `ssmtrade gradcheck`: the float64 central-difference
 * table of every op and of the whole model; exits 1 when any row fails. */
#include <stdio.h>

#include "check/gradcheck.h"
#include "check/model_check.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"

static const st_flag flags[] = {
    ST_DIMS_FLAGS,
    {"windows", "N", "windows in the whole-model check (2)"},
    {"checks", "N", "elements checked per tensor, sampled (32)"},
    {"seed", "S", "seed of the random inputs (1)"},
    {"model-only", NULL, "skip the per-op rows"},
    {"config", "FILE", "JSON file of flag values (flags win)"},
};
#define N_FLAGS (int)(sizeof flags / sizeof flags[0])

int st_cmd_gradcheck(int argc, char **argv) {
    st_args a;
    st_dims d;
    int n, checks, rc = st_args_parse(argc, argv, flags, N_FLAGS, &a);
    long long seed;
    if (rc == ST_OK && a.help) {
        st_args_usage(stdout, "gradcheck",
                      "Float64 central differences against the analytic gradients of every op and of the whole\n"
                      "model under the PPO loss; error = norm(numeric - analytic) / norm(numeric) per tensor.",
                      flags, N_FLAGS);
        st_args_free(&a);
        return 0;
    }
    if (rc == ST_OK) rc = st_args_dims(&a, "tiny", &d);
    if (rc == ST_OK) rc = st_args_int(&a, "windows", 2, &n);
    if (rc == ST_OK) rc = st_args_int(&a, "checks", 32, &checks);
    if (rc == ST_OK) rc = st_args_i64(&a, "seed", 1, &seed);
    st_gc_table t = {0};
    if (rc == ST_OK && !st_args_has(&a, "model-only")) rc = st_gradcheck_ops(&d, (uint64_t)seed, checks, &t);
    if (rc == ST_OK) rc = st_gradcheck_model(&d, n, (uint64_t)seed, checks, &t);
    st_args_free(&a);
    if (rc != ST_OK) {
        st_gc_table_free(&t);
        return rc;
    }
    printf("%-40s %12s %8s  %s\n", "op / tensor", "rel error", "elems", "status");
    for (int i = 0; i < t.n; i++) {
        const st_gc_row *r = &t.rows[i];
        int ok = r->rel_err <= ST_GC_BOUND && r->checked > 0;
        printf("%-40s %12.3e %8d  %s\n", r->name, r->rel_err, r->checked, ok ? "ok" : "FAIL");
    }
    int bad = st_gc_table_failures(&t);
    printf("\n%d of %d rows within %.0e\n", t.n - bad, t.n, ST_GC_BOUND);
    st_gc_table_free(&t);
    if (bad) return ST_FAIL(ST_ERR_NUMERIC, "%d gradient rows exceed the bound %.0e", bad, ST_GC_BOUND);
    return 0;
}
