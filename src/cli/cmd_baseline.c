/* cmd_baseline.c: placeholder until src/data lands (being written now). */
#include "cli/commands.h"
#include "core/error.h"
int st_cmd_baseline(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return ST_FAIL(ST_ERR_INTERNAL, "baseline is not built yet");
}
