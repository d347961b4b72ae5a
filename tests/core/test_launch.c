/* test_launch.c: the one-host launcher of multi-GPU training
 * (dist/launch.h) without GPUs: this program launches copies of itself as
 * the ranks (st_launch_ranks re-executes /proc/self/exe with the same
 * arguments), and each copy, seeing SSMTRADE_RANK, plays the part that
 * TEST_LAUNCH_PART names instead of training:
 *   ok      every rank exits 0: the launcher returns 0, each rank saw its
 *           rank, the world, its local rank and the id in its environment,
 *           and NCCL_NVLS_ENABLE=0;
 *   killed  rank 1 kills itself with SIGKILL while rank 0 waits forever (as
 *           a rank stuck in a collective with a dead peer does) and
 *           ignores the launcher's word (ST_LAUNCH_PEER_SIGNAL): the
 *           launcher returns 137 and ends rank 0 with SIGKILL after the
 *           grace period, not never;
 *   peer    the same, but rank 0 listens (st_rank_watch_peers, as a
 *           training rank does): it says "rank 0 of 2: stopping: another
 *           rank failed" and leaves at once, well within the grace period;
 *   defer   the same while rank 0 is inside st_rank_defer_peers (a
 *           checkpoint being written, 1 s here): it leaves after the
 *           write, not during it;
 *   fails   rank 0 exits 3 and rank 1 waits (the word ends it): 3;
 *   stop    the launcher itself gets SIGINT; it forwards it, every rank
 *           exits 130 as a stopped training run does, and the launcher
 *           returns 130 without killing anyone.
 * The environment checks: SSMTRADE_RANK set to text that is not a number,
 * or out of range, is refused by st_rank_from_env naming the variable;
 * OpenMPI's OMPI_COMM_WORLD_* make a rank without an id (mpirun), and are
 * checked the same way. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "dist/dist.h"
#include "dist/launch.h"
#include "test.h"

static const char *ID = "0123456789abcdef"; /* the ranks only pass it on here */

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static volatile sig_atomic_t got;
static void on_sig(int sig) { got = sig; }

/* A rank's part; returns its exit status. */
static int rank_part(const char *part) {
    st_rank_env r;
    int is_rank = 0;
    if (st_rank_from_env(&r, &is_rank) != ST_OK || !is_rank) return 50;
    if (strcmp(part, "ok") == 0) {
        const char *nvls = getenv("NCCL_NVLS_ENABLE");
        int good = r.world == 2 && r.local_rank == r.rank && strcmp(r.id_hex, ID) == 0;
        good = good && nvls && strcmp(nvls, "0") == 0;
        return good ? 0 : 51;
    }
    if (strcmp(part, "killed") == 0) {
        if (r.rank == 1) {
            sleep_s(0.3);
            raise(SIGKILL);
        }
        signal(ST_LAUNCH_PEER_SIGNAL, SIG_IGN); /* stuck: only SIGKILL ends it */
        for (;;) sleep_s(1);
    }
    if (strcmp(part, "peer") == 0 || strcmp(part, "defer") == 0) {
        if (r.rank == 1) {
            sleep_s(0.3);
            raise(SIGKILL);
        }
        if (!freopen(getenv("TEST_LAUNCH_LOG"), "w", stderr)) return 54; /* the message, for the test */
        setvbuf(stderr, NULL, _IONBF, 0);
        st_rank_watch_peers(r.rank, r.world);
        if (strcmp(part, "defer") == 0) {
            st_rank_defer_peers(1);
            sleep_s(1.0); /* a checkpoint being written when the word comes */
            fputs("write done\n", stderr);
            st_rank_defer_peers(0);
        }
        for (;;) sleep_s(1);
    }
    if (strcmp(part, "fails") == 0) {
        if (r.rank == 0) {
            sleep_s(0.2);
            return 3;
        }
        for (;;) sleep_s(1); /* SIGTERM's default action ends it */
    }
    if (strcmp(part, "stop") == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sig;
        sigaction(SIGINT, &sa, NULL);
        while (!got) sleep_s(0.02);
        return got == SIGINT ? 130 : 52;
    }
    return 53;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void one(char **argv, const char *part, int want, double within_s, double at_least_s) {
    setenv("TEST_LAUNCH_PART", part, 1);
    pid_t me = getpid();
    if (strcmp(part, "stop") == 0 && fork() == 0) { /* a user's Ctrl-C at the launcher, a moment after the start */
        sleep_s(0.5);
        kill(me, SIGINT);
        _exit(0);
    }
    double t0 = now_s();
    int rc = st_launch_ranks(2, argv, ID);
    double dt = now_s() - t0;
    printf("  %-7s exit %3d in %.2f s (want %d within %.1f s)\n", part, rc, dt, want, within_s);
    CHECK(rc == want, "%s: the launcher returned %d, not %d (%s)", part, rc, want, st_last_error());
    CHECK(dt < within_s, "%s: the launcher took %.2f s (more than %.1f s)", part, dt, within_s);
    CHECK(dt >= at_least_s, "%s: the launcher took %.2f s (less than %.1f s)", part, dt, at_least_s);
}

/* The log rank 0 of the peer / defer parts wrote: want each line, in order. */
static void log_has(const char *path, const char *part, const char *first, const char *second) {
    FILE *f = fopen(path, "r");
    char text[2048] = "";
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = 0;
    if (f) fclose(f);
    const char *a = strstr(text, first), *b = second ? strstr(text, second) : NULL;
    CHECK(a && (!second || (b && b > a)), "%s: rank 0 wrote '%s', not '%s'%s%s", part, text, first,
          second ? " then " : "", second ? second : "");
}

static void env_refusals(void) {
    const struct {
        const char *rank, *world, *says;
    } cases[] = {{"x", "2", "SSMTRADE_RANK"}, {"2", "2", "SSMTRADE_RANK"}, {"0", "0", "SSMTRADE_WORLD"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv("SSMTRADE_RANK", cases[i].rank, 1);
        setenv("SSMTRADE_WORLD", cases[i].world, 1);
        setenv("SSMTRADE_LOCAL_RANK", "0", 1);
        setenv("SSMTRADE_DIST_ID", ID, 1);
        st_rank_env r;
        int is_rank = 0;
        int rc = st_rank_from_env(&r, &is_rank);
        CHECK(rc == ST_ERR_INPUT && strstr(st_last_error(), cases[i].says), "rank '%s' world '%s': rc %d '%s'",
              cases[i].rank, cases[i].world, rc, st_last_error());
    }
    unsetenv("SSMTRADE_RANK"), unsetenv("SSMTRADE_WORLD"), unsetenv("SSMTRADE_LOCAL_RANK");
    unsetenv("SSMTRADE_DIST_ID");
    st_rank_env r;
    int is_rank = 1;
    CHECK(st_rank_from_env(&r, &is_rank) == ST_OK && !is_rank, "no variables: not a rank");
    /* OpenMPI's variables: a rank without an id (it comes from NCCL_COMM_ID) */
    setenv("OMPI_COMM_WORLD_RANK", "5", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "16", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
    int rc = st_rank_from_env(&r, &is_rank);
    CHECK(rc == ST_OK && is_rank && r.mpi && r.rank == 5 && r.world == 16 && r.local_rank == 1 && !r.id_hex,
          "mpirun's variables: rc %d, rank %d of %d, local %d", rc, r.rank, r.world, r.local_rank);
    setenv("OMPI_COMM_WORLD_RANK", "16", 1);
    rc = st_rank_from_env(&r, &is_rank);
    CHECK(rc == ST_ERR_INPUT && strstr(st_last_error(), "OMPI_COMM_WORLD_RANK"), "rank 16 of 16: rc %d '%s'", rc,
          st_last_error());
    unsetenv("OMPI_COMM_WORLD_RANK"), unsetenv("OMPI_COMM_WORLD_SIZE"), unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
}

int main(int argc, char **argv) {
    (void)argc;
    if (getenv("SSMTRADE_RANK") && getenv("TEST_LAUNCH_PART")) return rank_part(getenv("TEST_LAUNCH_PART"));
    setvbuf(stdout, NULL, _IOLBF, 0);
    unsetenv("SSMTRADE_RANK");
    char log[64];
    snprintf(log, sizeof log, "/tmp/st_launch_%d.log", (int)getpid());
    setenv("TEST_LAUNCH_LOG", log, 1);
    const char *said = "rank 0 of 2: stopping: another rank failed";
    one(argv, "ok", 0, 10, 0);
    one(argv, "killed", 128 + SIGKILL, ST_LAUNCH_GRACE_S + 4, ST_LAUNCH_GRACE_S);
    one(argv, "peer", 128 + SIGKILL, 3, 0);
    log_has(log, "peer", said, NULL);
    one(argv, "defer", 128 + SIGKILL, 4, 1.0);
    log_has(log, "defer", "write done", said);
    one(argv, "fails", 3, 4, 0);
    one(argv, "stop", 130, 6, 0);
    remove(log);
    unsetenv("TEST_LAUNCH_PART");
    env_refusals();
    TEST_MAIN_END();
}
