/* test_params.c: the parameter table: names and shapes of DESIGN section 5,
 * the default preset's exact count (551,100), the no-decay set, and
 * initialisation identical in float and double. */
#include "model/params.h"
#include "test.h"

static int count_decay(const st_param_table *t, const char *name) {
    const st_param *p = st_param_find(t, name);
    return p ? p->decay : -1;
}

int main(void) {
    st_dims d;
    st_param_table t;
    CHECK(st_dims_preset("default", &d) == 0, "default preset");
    CHECK(st_param_table_build(&d, &t) == 0, "build default table");
    printf("default preset: %zu parameters in %d tensors\n", t.total, t.n);
    CHECK(t.total == 551100, "default preset has %zu parameters, expected exactly 551,100", t.total);
    size_t sum = 0;
    for (int i = 0; i < t.n; i++) {
        sum += t.p[i].count;
        for (int j = 0; j < i; j++) CHECK(strcmp(t.p[i].name, t.p[j].name) != 0, "duplicate name %s", t.p[i].name);
        if (i > 0) CHECK(t.p[i].offset == t.p[i - 1].offset + t.p[i - 1].count, "offsets not contiguous at %s",
                         t.p[i].name);
    }
    CHECK(sum == t.total, "counts add up");
    /* Shapes named in DESIGN section 5. */
    const st_param *p = st_param_find(&t, "vsn.var.glu_w");
    CHECK(p && p->ndim == 3 && p->shape[0] == 40 && p->shape[1] == 64 && p->shape[2] == 32, "vsn.var.glu_w shape");
    p = st_param_find(&t, "w_in.weight");
    CHECK(p && p->shape[0] == 128 && p->shape[1] == 48, "w_in.weight [D, Dv+C]");
    p = st_param_find(&t, "mix.1.in_proj.weight");
    CHECK(p && p->shape[0] == 648 && p->shape[1] == 128, "mix.1.in_proj.weight [2*256+2*64+8, 128]");
    p = st_param_find(&t, "mix.0.conv_w");
    CHECK(p && p->shape[0] == 384 && p->shape[1] == 4, "mix.0.conv_w [d_inner+2GN, W]");
    CHECK(st_param_find(&t, "vsn.sel.ctx.bias") == NULL, "the selection ctx linear has no bias");
    CHECK(st_param_find(&t, "mix.0.in_proj.bias") == NULL, "in_proj has no bias");
    CHECK(st_param_find(&t, "mix.2.A_log") == NULL, "only L=2 layers");
    /* No weight decay on norms, biases, A_log, dt_bias, Dskip; decay on matrices. */
    CHECK(count_decay(&t, "mix.0.A_log") == 0 && count_decay(&t, "mix.0.dt_bias") == 0 &&
              count_decay(&t, "mix.0.Dskip") == 0 && count_decay(&t, "ln.0.weight") == 0 &&
              count_decay(&t, "mix.0.norm_w") == 0 && count_decay(&t, "vsn.var.ln_w") == 0 &&
              count_decay(&t, "pi1.bias") == 0 && count_decay(&t, "vsn.sel.norm.weight") == 0,
          "no-decay set");
    CHECK(count_decay(&t, "mix.0.in_proj.weight") == 1 && count_decay(&t, "vsn.var.fc1_w") == 1 &&
              count_decay(&t, "pi2.weight") == 1,
          "decay set");
    /* Init: same values in float and double; Mamba2 reference ranges. */
    float *wf = malloc(sizeof(float) * t.total);
    double *wd = malloc(sizeof(double) * t.total);
    st_params_init_f32(&t, 7, wf);
    st_params_init_f64(&t, 7, wd);
    int same = 1;
    for (size_t i = 0; i < t.total; i++) same &= wf[i] == (float)wd[i];
    CHECK(same, "float and double init differ");
    const st_param *al = st_param_find(&t, "mix.0.A_log"), *dt = st_param_find(&t, "mix.0.dt_bias");
    for (size_t i = 0; i < al->count; i++) {
        double a = exp(wd[al->offset + i]), sp = log1p(exp(wd[dt->offset + i]));
        CHECK(a >= 1 && a <= 16, "A = exp(A_log) = %g outside [1,16]", a);
        CHECK(sp >= 1e-3 * 0.999 && sp <= 1e-1 * 1.001, "softplus(dt_bias) = %g outside [1e-3,1e-1]", sp);
    }
    st_param_table_free(&t);

    /* Tiny and odd sizes build; an invalid size is refused. */
    CHECK(st_dims_preset("tiny", &d) == 0 && st_param_table_build(&d, &t) == 0, "tiny table");
    printf("tiny preset: %zu parameters\n", t.total);
    st_param_table_free(&t);
    d.headdim = 7;
    CHECK(st_param_table_build(&d, &t) != 0, "headdim not dividing d_inner must be refused");
    CHECK(st_dims_preset("huge", &d) != 0, "unknown preset refused");
    free(wf);
    free(wd);
    TEST_MAIN_END();
}
