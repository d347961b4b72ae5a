/* test_trace_cli.c: the tracer's commands end to end, run against the
 * ssmtrade binary that the build puts beside this test (skipped, exit 77,
 * when it is not there): `labels` (table and JSON), `train --trace
 * sentinel --inject` (exit status, report, dump folder), `replay DUMP`,
 * `train --trace full --poison-padding` (clean, status in the progress
 * line), `smoke` clean and injected (table and summary), `dump`, and the
 * one-line errors of bad tracer flags. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

static char bin[PATH_MAX], tmp[64];

/* Runs `ssmtrade args` with stdout and stderr to files; returns the exit status. */
static int run(const char *args) {
    char cmd[PATH_MAX + 1200];
    snprintf(cmd, sizeof cmd, "%s %.900s > %s/out 2> %s/err", bin, args, tmp, tmp);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *slurp(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmp, name);
    FILE *f = fopen(path, "rb");
    if (!f) return calloc(1, 1);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = calloc((size_t)n + 1, 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = 0;
    fclose(f);
    return s;
}

static int has(const char *file, const char *needle) {
    char *s = slurp(file);
    int hit = strstr(s, needle) != NULL;
    free(s);
    return hit;
}

static int lines(const char *file) {
    char *s = slurp(file);
    int n = 0;
    for (char *p = s; *p; p++)
        n += *p == '\n';
    free(s);
    return n;
}

static int exists(const char *rel) {
    char path[256];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", tmp, rel);
    return stat(path, &st) == 0;
}

#define SMALL                                                                                                          \
    "--batch 4 --rollout 4 --window 16 --minibatches 2 --epochs 1 --instruments 2 --bars 1500 "                        \
    "--episode-length 6"

static void test_labels(void) {
    CHECK(run("labels --preset tiny") == 0, "labels failed");
    int n = 0;
    char *s = slurp("out");
    for (char *p = s; (p = strstr(p, "\n ")) != NULL; p++) {
        int id;
        if (sscanf(p + 1, "%d", &id) == 1) n++;
    }
    free(s);
    printf("labels --preset tiny: %d labels\n", n);
    CHECK(n >= 49, "labels --preset tiny lists %d labels, need >= 49", n);
    CHECK(has("out", " train_vsn_out ") && has("out", " step_entry_w_in_W ") && has("out", " step_entry_w_in_b "),
          "labels misses train_vsn_out, step_entry_w_in_W or step_entry_w_in_b");
    CHECK(run("labels --preset tiny --json") == 0 && has("out", "\"name\":\t\"train_vsn_out\""), "labels --json");
}

static void test_train_trip_replay(void) {
    char args[512];
    snprintf(args, sizeof args, "train " SMALL " --updates 3 --trace sentinel --inject train_vsn_out:1:40 --out %s/run",
             tmp);
    int rc = run(args);
    CHECK(rc == 4, "a trip exits with status 4 (numeric), got %d", rc);
    CHECK(has("out", "first non-finite label (cause candidate):") && has("out", "#") &&
              has("out", "train_vsn_out                step 1, epoch 0 minibatch 0  index 40"),
          "the report names train_vsn_out, step 1, index 40");
    CHECK(has("out", "trace sentinel ok") && has("out", "trace TRIPPED"), "progress lines show the tracer status");
    CHECK(lines("err") == 1 && has("err", "train_vsn_out"), "one line on stderr naming the label");
    CHECK(exists("run/trace_dump/pre_step.safetensors") && exists("run/trace_dump/trip.safetensors") &&
              exists("run/trace_dump/report.txt"),
          "the dump folder");
    snprintf(args, sizeof args, "replay %s/run/trace_dump", tmp);
    CHECK(run(args) == 0 && has("out", "reproduced: the dump's first label train_vsn_out, step 1, index 40"),
          "replay reproduces the trip");
}

static void test_train_poison_clean(void) {
    char args[512];
    snprintf(args, sizeof args, "train " SMALL " --updates 2 --trace full --poison-padding --out %s/clean", tmp);
    CHECK(run(args) == 0, "full trace with poisoned padding fails");
    CHECK(has("out", "trace full ok") && !has("out", "TRIPPED"), "progress line ends in 'trace full ok'");
}

static void test_smoke(void) {
    CHECK(run("smoke " SMALL " --runs 2 --steps 2 --seed 16962") == 0, "clean smoke fails");
    CHECK(has("out", "all 2 runs clean") && has("out", "16963  clean"), "clean smoke table and summary");
    CHECK(run("smoke " SMALL " --runs 2 --steps 2 --seed 16962 --inject act_logits:1:5:inf") == 0,
          "injected smoke exits 0 when every run names the injected label");
    CHECK(has("out", "in all 2 failing runs the first non-finite label is act_logits at index 5"),
          "injected smoke summary");
    /* an injection after the last step never fires: the drill failed, status 4 */
    CHECK(run("smoke " SMALL " --runs 1 --steps 2 --inject act_logits:5:5") == 4 && lines("err") == 1,
          "a smoke whose runs miss the injected label exits 4");
}

static void test_dump_and_errors(void) {
    char args[512];
    snprintf(args, sizeof args, "dump " SMALL " --out %s/step.safetensors", tmp);
    CHECK(run(args) == 0 && exists("step.safetensors") && has("out", "labelled tensors of step 0"), "dump");
    CHECK(run("train " SMALL " --trace loud") != 0 && lines("err") == 1 && has("err", "--trace"), "bad --trace");
    CHECK(run("train " SMALL " --trace full --inject nope:0:0") != 0 && lines("err") == 1 && has("err", "nope"),
          "bad --inject label");
    snprintf(args, sizeof args, "replay %s", tmp);
    CHECK(run(args) != 0 && lines("err") == 1, "replay of a folder that is no dump");
}

int main(void) {
    ssize_t n = readlink("/proc/self/exe", bin, sizeof bin - 16);
    if (n <= 0) return 77;
    bin[n] = 0;
    char *slash = strrchr(bin, '/');
    snprintf(slash + 1, sizeof bin - (size_t)(slash + 1 - bin), "ssmtrade");
    if (access(bin, X_OK) != 0) {
        printf("skipped: no ssmtrade binary beside the test (%s)\n", bin);
        return 77;
    }
    snprintf(tmp, sizeof tmp, "/tmp/st_trace_cli_XXXXXX");
    if (!mkdtemp(tmp)) return 1;
    test_labels();
    test_train_trip_replay();
    test_train_poison_clean();
    test_smoke();
    test_dump_and_errors();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd) != 0) printf("could not remove %s\n", tmp);
    TEST_MAIN_END();
}
