/* cmd_gen_data.c: `ssmtrade gen-data`: writes the built-in synthetic market
 * (src/data/synthetic.h) as one CSV per instrument, plus a README.md that
 * states the seed and the planted structure. Loading the folder back with
 * `--data DIR` gives the same bars to the printed precision (10 digits).
 * Flags through cli/args.h, so `--config FILE` works as for every command. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "data/cache.h"
#include "data/csv.h"
#include "data/dataset.h"
#include "data/synthetic.h"

enum { PATH_BYTES = 4096 };

static const st_flag flags[] = {
    {"out", "DIR", "folder to write (created if needed)"},
    {"seed", "S", "market seed (default 1)"},
    {"instruments", "N", "instruments (default 8)"},
    {"bars", "N", "hourly bars per instrument (default 20000; K = 64 needs >= 362 to load)"},
    {"config", "FILE", "JSON file of flag values (flags win)"},
};
#define N_FLAGS (int)(sizeof flags / sizeof flags[0])

typedef struct {
    const char *out;
    long long seed;
    int instruments, bars;
} gen_args;

static int parse_args(const st_args *a, gen_args *g) {
    g->out = st_args_str(a, "out", NULL);
    ST_TRY(st_args_i64(a, "seed", 1, &g->seed));
    ST_TRY(st_args_int(a, "instruments", 8, &g->instruments));
    ST_TRY(st_args_int(a, "bars", 20000, &g->bars));
    ST_REQUIRE(g->out && g->out[0], ST_ERR_INPUT, "--out DIR is required (see ssmtrade gen-data --help)");
    ST_REQUIRE(g->seed >= 0, ST_ERR_INPUT, "--seed %lld: must be non-negative", g->seed);
    ST_REQUIRE(g->instruments >= 1 && g->instruments <= 10000, ST_ERR_INPUT, "--instruments %d: expected 1 to 10000",
               g->instruments);
    ST_REQUIRE(g->bars >= 2 && g->bars <= 100000000, ST_ERR_INPUT, "--bars %d: expected 2 to 100000000", g->bars);
    return ST_OK;
}

static int write_readme(const gen_args *a) {
    char path[PATH_BYTES];
    snprintf(path, sizeof path, "%s/README.md", a->out);
    FILE *f = fopen(path, "w");
    ST_REQUIRE(f, ST_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    st_synthetic_describe(f, (uint64_t)a->seed, a->instruments, a->bars);
    ST_REQUIRE(fclose(f) == 0, ST_ERR_IO, "cannot write %s", path);
    return ST_OK;
}

/* One instrument at a time: memory stays at one instrument's bars. */
static int write_instrument(const gen_args *a, int i) {
    st_instrument in;
    ST_TRY(st_synthetic_instrument((uint64_t)a->seed, i, a->bars, &in));
    char path[PATH_BYTES];
    int rc = ST_OK;
    if (snprintf(path, sizeof path, "%s/%s.csv", a->out, in.name) >= (int)sizeof path)
        rc = ST_FAIL(ST_ERR_INPUT, "--out '%s': path too long", a->out);
    if (rc == ST_OK) rc = st_csv_write(path, &in);
    st_instrument_free(&in);
    return rc;
}

static int run(const st_args *a) {
    gen_args g;
    ST_TRY(parse_args(a, &g));
    ST_TRY(st_make_dirs(g.out));
    for (int i = 0; i < g.instruments; i++)
        ST_TRY(write_instrument(&g, i));
    ST_TRY(write_readme(&g));
    printf("wrote %d instruments x %d bars (seed %lld) to %s\n", g.instruments, g.bars, g.seed, g.out);
    return ST_OK;
}

int st_cmd_gen_data(int argc, char **argv) {
    st_args a;
    ST_TRY(st_args_parse(argc, argv, flags, N_FLAGS, &a));
    if (a.help) {
        st_args_usage(stdout, "gen-data",
                      "Writes the built-in synthetic market as CSV files DIR/syn0.csv ... (header\n"
                      "timestamp,open,high,low,close,volume) and DIR/README.md describing it.",
                      flags, N_FLAGS);
        st_args_free(&a);
        return 0;
    }
    int rc = run(&a);
    st_args_free(&a);
    return rc;
}
