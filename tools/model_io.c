/* model_io.c: dumps one whole-model forward and backward under the PPO loss,
 * in float64, for the PyTorch parity check (scripts/torch_parity.py).
 *
 *   model_io --preset tiny|default|odd --windows N --seed S --out DIR
 *
 * Builds the parameter table of the preset (DESIGN section 5), initialises
 * it (st_params_init_f64) plus N(0, 0.05^2) noise so that no norm weight is
 * exactly 1 and no bias exactly 0 (every path then carries a gradient),
 * draws a window batch [N, K, F+C] ~ N(0, 1) and a PPO batch (actions,
 * old_logp near log(1/3) so that both clip regimes occur, advantages, old
 * values, returns), and writes
 *   DIR/weights.safetensors  every parameter under its DESIGN name (F64),
 *                            the sizes in the metadata
 *   DIR/batch.safetensors    window, action (I32), old_logp, adv, old_value, ret
 *   DIR/outputs.safetensors  the float64 run (layout in tools/model_io.h)
 * The run reads the two input files back, so what PyTorch loads is exactly
 * what the C model ran on. model_io_f32 DIR repeats the run in float. */
#define ST_REAL_BITS 64
#include "model_io.h"

#include <errno.h>
#include <sys/stat.h>

#include "check/gradcheck.h"
#include "core/philox.h"

typedef struct {
    const char *preset, *out;
    int windows;
    uint64_t seed;
} mio_args;

static int usage(void) {
    fprintf(stderr, "usage: model_io --preset tiny|default|odd --windows N --seed S --out DIR\n");
    return 2;
}

static int parse_args(int argc, char **argv, mio_args *a) {
    *a = (mio_args){.preset = "tiny", .out = NULL, .windows = 3, .seed = 1};
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return ST_FAIL(ST_ERR_INPUT, "option %s needs a value", argv[i]);
        if (strcmp(argv[i], "--preset") == 0) a->preset = v;
        else if (strcmp(argv[i], "--out") == 0) a->out = v;
        else if (strcmp(argv[i], "--windows") == 0) a->windows = atoi(v);
        else if (strcmp(argv[i], "--seed") == 0) a->seed = strtoull(v, NULL, 10);
        else return ST_FAIL(ST_ERR_INPUT, "unknown option %s", argv[i]);
        i++;
    }
    ST_REQUIRE(a->out, ST_ERR_INPUT, "--out DIR is required");
    ST_REQUIRE(a->windows >= 1 && a->windows <= 4096, ST_ERR_INPUT, "--windows must be in [1, 4096], got %d",
               a->windows);
    return ST_OK;
}

/* Initial weights plus noise, as the whole-model gradient check does. */
static void make_weights(const st_param_table *t, uint64_t seed, double *w) {
    st_params_init_f64(t, seed, w);
    double *noise = malloc(sizeof(double) * t->total);
    if (!noise) return; /* plain init then: still a valid (weaker) check */
    st_gc_randn(noise, (long)t->total, 0.05, seed, 11);
    for (size_t i = 0; i < t->total; i++) w[i] += noise[i];
    free(noise);
}

/* The window and PPO batch: fresh Philox normals (salts as model_check.c). */
static void make_batch(const st_dims *d, uint64_t seed, mio_batch *b) {
    int n = b->n;
    st_gc_randn(b->X, (long)n * d->K * (d->F + d->C), 1.0, seed, 12);
    st_gc_randn(b->adv, n, 1.0, seed, 13);
    st_gc_randn(b->old_value, n, 0.5, seed, 14);
    st_gc_randn(b->ret, n, 1.0, seed, 15);
    st_gc_randn(b->old_logp, n, 0.3, seed, 16);
    for (int i = 0; i < n; i++) {
        b->old_logp[i] -= 1.1; /* near log(1/3): ratios around 1, both clip regimes */
        b->action[i] = (int)(st_philox_draw(seed, ST_STREAM_TEST, 7000000u + (uint64_t)i).v[0] % (uint32_t)d->A);
    }
}

static int write_weights(const char *path, const st_dims *d, const st_param_table *t, const double *w,
                         const char *preset, uint64_t seed) {
    st_st_tensor *ts = calloc((size_t)t->n, sizeof *ts);
    ST_REQUIRE(ts, ST_ERR_MEMORY, "out of memory");
    for (int i = 0; i < t->n; i++) ts[i] = mio_param_tensor(&t->p[i], t->p[i].name, w + t->p[i].offset);
    char text[MIO_NDIMS][16], seed_s[32];
    st_st_meta meta[MIO_NDIMS + 3];
    mio_dims_meta(d, text, meta);
    snprintf(seed_s, sizeof seed_s, "%llu", (unsigned long long)seed);
    meta[MIO_NDIMS] = (st_st_meta){"preset", preset};
    meta[MIO_NDIMS + 1] = (st_st_meta){"seed", seed_s};
    meta[MIO_NDIMS + 2] = (st_st_meta){"format", "ssmtrade model_io weights"};
    int rc = st_safetensors_write(path, ts, t->n, meta, MIO_NDIMS + 3);
    free(ts);
    return rc;
}

static int write_batch(const char *path, const st_dims *d, const mio_batch *b) {
    int n = b->n;
    st_st_tensor ts[] = {
        mio_tensor("window", ST_DT_F64, 3, n, d->K, d->F + d->C, b->X),
        mio_tensor("action", ST_DT_I32, 1, n, 1, 1, b->action),
        mio_tensor("old_logp", ST_DT_F64, 1, n, 1, 1, b->old_logp),
        mio_tensor("adv", ST_DT_F64, 1, n, 1, 1, b->adv),
        mio_tensor("old_value", ST_DT_F64, 1, n, 1, 1, b->old_value),
        mio_tensor("ret", ST_DT_F64, 1, n, 1, 1, b->ret),
    };
    st_st_meta meta[] = {{"clip", "0.2"}, {"vclip", "0.2"}, {"vf_coef", "0.5"}, {"ent_coef", "0.01"},
                         {"format", "ssmtrade model_io batch"}};
    return st_safetensors_write(path, ts, 6, meta, 5);
}

/* Inputs to DIR, then the float64 run from them. */
static int model_io(const mio_args *a) {
    st_dims d;
    ST_TRY(st_dims_preset(a->preset, &d));
    ST_REQUIRE(mkdir(a->out, 0755) == 0 || errno == EEXIST, ST_ERR_IO, "cannot create %s: %s", a->out,
               strerror(errno));
    st_param_table t;
    ST_TRY(st_param_table_build(&d, &t));
    double *w = malloc(sizeof(double) * t.total);
    mio_batch b;
    int rc = w ? mio_batch_alloc(&b, &d, a->windows) : ST_FAIL(ST_ERR_MEMORY, "out of memory");
    if (rc == ST_OK) {
        make_weights(&t, a->seed, w);
        make_batch(&d, a->seed, &b);
        char path[MIO_PATH];
        mio_join(path, a->out, "weights.safetensors");
        rc = write_weights(path, &d, &t, w, a->preset, a->seed);
        mio_join(path, a->out, "batch.safetensors");
        if (rc == ST_OK) rc = write_batch(path, &d, &b);
        mio_batch_free(&b);
    }
    free(w);
    st_param_table_free(&t);
    if (rc == ST_OK) rc = mio_run_dir(a->out, "outputs.safetensors", 1);
    return rc;
}

int main(int argc, char **argv) {
    mio_args a;
    if (parse_args(argc, argv, &a) != ST_OK) {
        fprintf(stderr, "model_io: %s\n", st_last_error());
        return usage();
    }
    if (model_io(&a) != ST_OK) {
        fprintf(stderr, "model_io: %s\n", st_last_error());
        return 1;
    }
    return 0;
}
