/* launch.c: the one-host launcher of data-parallel training (dist/launch.h). */
#define _GNU_SOURCE /* prctl */
#include "dist/launch.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "dist/dist.h"

static int env_int(const char *name, int lo, int hi, int *out, const char *who) {
    const char *v = getenv(name);
    char *end = NULL;
    long x = v ? strtol(v, &end, 10) : 0;
    ST_REQUIRE(v && end != v && *end == 0 && x >= lo && x <= hi, ST_ERR_INPUT,
               "environment variable %s='%s': expected a whole number in [%d, %d] (set by %s)", name, v ? v : "", lo,
               hi, who);
    *out = (int)x;
    return ST_OK;
}

int st_rank_from_env(st_rank_env *r, int *is_rank) {
    memset(r, 0, sizeof *r);
    *is_rank = 0;
    if (!getenv("SSMTRADE_RANK") && getenv("OMPI_COMM_WORLD_RANK")) { /* under OpenMPI's mpirun */
        ST_TRY(env_int("OMPI_COMM_WORLD_SIZE", 1, 4096, &r->world, "mpirun"));
        ST_TRY(env_int("OMPI_COMM_WORLD_RANK", 0, r->world - 1, &r->rank, "mpirun"));
        ST_TRY(env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, 4095, &r->local_rank, "mpirun"));
        r->id_hex = getenv("SSMTRADE_DIST_ID"); /* usually NULL: NCCL_COMM_ID names rank 0's address */
        r->mpi = 1;
        *is_rank = 1;
        return ST_OK;
    }
    if (!getenv("SSMTRADE_RANK")) return ST_OK;
    ST_TRY(env_int("SSMTRADE_WORLD", 1, 4096, &r->world, "ssmtrade train --gpus"));
    ST_TRY(env_int("SSMTRADE_RANK", 0, r->world - 1, &r->rank, "ssmtrade train --gpus"));
    ST_TRY(env_int("SSMTRADE_LOCAL_RANK", 0, 4095, &r->local_rank, "ssmtrade train --gpus"));
    r->id_hex = getenv("SSMTRADE_DIST_ID");
    ST_REQUIRE(r->id_hex, ST_ERR_INPUT,
               "environment variable SSMTRADE_DIST_ID is not set (set by ssmtrade train --gpus)");
    *is_rank = 1;
    return ST_OK;
}

/* ---- a rank's side: the word that a peer failed ---- */

static volatile sig_atomic_t peer_deferring, peer_lost;
static char peer_msg[256];
static size_t peer_msg_len;

static void leave_for_peer(void) {
    ssize_t w = write(2, peer_msg, peer_msg_len);
    (void)w;
    _exit(ST_LAUNCH_PEER_EXIT);
}

static void on_peer_signal(int sig) {
    (void)sig;
    if (peer_deferring) peer_lost = 1;
    else leave_for_peer();
}

void st_rank_watch_peers(int rank, int world) {
    int n = snprintf(peer_msg, sizeof peer_msg,
                     "ssmtrade train: rank %d of %d: stopping: another rank failed (the launcher says which); the "
                     "last checkpoint is the one to resume from\n",
                     rank, world);
    peer_msg_len = n > 0 && (size_t)n < sizeof peer_msg ? (size_t)n : strlen(peer_msg);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_peer_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(ST_LAUNCH_PEER_SIGNAL, &sa, NULL);
}

void st_rank_defer_peers(int on) {
    peer_deferring = on != 0;
    if (!on && peer_lost) leave_for_peer();
}

/* ---- the launcher ---- */

static volatile sig_atomic_t forward_sig;
static void on_signal(int sig) { forward_sig = sig; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "exited with status 3" / "was killed by signal 9 (Killed)" */
static void describe(int status, char *buf, size_t n) {
    if (WIFSIGNALED(status))
        snprintf(buf, n, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, n, "exited with status %d", WEXITSTATUS(status));
}

extern char **environ;

/* This process's environment without the variables below, then
 * SSMTRADE_RANK, _WORLD, _LOCAL_RANK, _DIST_ID and NCCL_NVLS_ENABLE=0
 * (NULL-terminated, every string malloc'd; NULL when out of memory). */
static char **rank_environment(int rank, int world, const char *hex) {
    static const char *const ours[] = {"SSMTRADE_RANK=", "SSMTRADE_WORLD=", "SSMTRADE_LOCAL_RANK=",
                                       "SSMTRADE_DIST_ID=", "NCCL_NVLS_ENABLE="};
    size_t n = 0;
    while (environ[n]) n++;
    char **env = calloc(n + 6, sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    int ok = 1;
    for (size_t i = 0; ok && i < n; i++) {
        int mine = 0;
        for (size_t j = 0; j < sizeof ours / sizeof ours[0]; j++)
            mine |= strncmp(environ[i], ours[j], strlen(ours[j])) == 0;
        if (mine) continue;
        ok = (env[k++] = strdup(environ[i])) != NULL;
    }
    char v[5][ST_DIST_ID_HEX + 32];
    snprintf(v[0], sizeof v[0], "SSMTRADE_RANK=%d", rank);
    snprintf(v[1], sizeof v[1], "SSMTRADE_WORLD=%d", world);
    snprintf(v[2], sizeof v[2], "SSMTRADE_LOCAL_RANK=%d", rank);
    snprintf(v[3], sizeof v[3], "SSMTRADE_DIST_ID=%s", hex);
    snprintf(v[4], sizeof v[4], "NCCL_NVLS_ENABLE=0");
    for (int j = 0; ok && j < 5; j++) ok = (env[k++] = strdup(v[j])) != NULL;
    if (!ok) {
        for (size_t i = 0; i < k; i++) free(env[i]);
        free(env);
        return NULL;
    }
    return env;
}

static void free_environment(char **env) {
    for (size_t i = 0; env[i]; i++) free(env[i]);
    free(env);
}

static int exit_code(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

int st_launch_ranks(int world, char **argv, const char *hex) {
    pid_t *pid = calloc((size_t)world, sizeof *pid);
    int *done = calloc((size_t)world, sizeof *done);
    if (!pid || !done) {
        free(pid), free(done);
        ST_FAIL(ST_ERR_MEMORY, "out of memory");
        return 1;
    }
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    forward_sig = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    pid_t parent = getpid();
    fflush(stdout), fflush(stderr);
    int started = 0, rc = 0;
    for (int r = 0; r < world; r++) {
        /* the child's environment is made here: between fork and exec only
         * async-signal-safe calls (NCCL's bootstrap thread may hold a lock) */
        char **envp = rank_environment(r, world, hex);
        if (!envp) {
            ST_FAIL(ST_ERR_MEMORY, "out of memory for rank %d's environment", r);
            rc = 1;
            break;
        }
        pid_t p = fork();
        if (p == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* the ranks never outlive the launcher */
            if (getppid() != parent) _exit(1);
            sigaction(SIGINT, &old_int, NULL);
            sigaction(SIGTERM, &old_term, NULL);
            execve("/proc/self/exe", argv, envp);
            static const char msg[] = "ssmtrade train: a rank could not start /proc/self/exe\n";
            ssize_t w = write(2, msg, sizeof msg - 1);
            (void)w;
            _exit(127);
        }
        free_environment(envp);
        if (p < 0) {
            ST_FAIL(ST_ERR_IO, "cannot start rank %d of %d: %s", r, world, strerror(errno));
            rc = 1;
            break;
        }
        pid[r] = p;
        started++;
    }
    int left = started, failed = -1, user_stop = 0;
    double deadline = 0;
    if (rc) { /* not all started: stop those that did */
        for (int r = 0; r < started; r++) kill(pid[r], ST_LAUNCH_PEER_SIGNAL);
        deadline = now_s() + ST_LAUNCH_GRACE_S;
        failed = world; /* no rank's status is the answer */
    }
    while (left > 0) {
        if (forward_sig) {
            user_stop = 1; /* the ranks stop together after their update: 130 / 143 is their answer */
            for (int r = 0; r < world; r++)
                if (pid[r] && !done[r]) kill(pid[r], forward_sig);
            forward_sig = 0;
        }
        int status = 0;
        pid_t p = waitpid(-1, &status, deadline > 0 ? WNOHANG : 0);
        if (p < 0 && errno == EINTR) continue;
        if (p < 0) break;
        if (p == 0) { /* stopping: past the grace period the rest are killed */
            if (now_s() > deadline) {
                for (int r = 0; r < world; r++)
                    if (pid[r] && !done[r]) kill(pid[r], SIGKILL);
                deadline = now_s() + 3600; /* once */
            }
            struct timespec ts = {0, 50 * 1000000L};
            nanosleep(&ts, NULL);
            continue;
        }
        int r = 0;
        while (r < world && pid[r] != p) r++;
        if (r == world) continue;
        done[r] = 1;
        left--;
        int code = exit_code(status);
        if (code != 0 && rc == 0) rc = code;
        if (code != 0 && failed < 0 && !(user_stop && (code == 130 || code == 143))) {
            failed = r;
            rc = code;
            if (left > 0) {
                char how[96];
                describe(status, how, sizeof how);
                fprintf(stderr, "ssmtrade train: rank %d of %d (pid %d) %s: stopping the other %d rank(s)\n", r, world,
                        (int)p, how, left);
                fflush(stderr);
                for (int q = 0; q < world; q++)
                    if (pid[q] && !done[q]) kill(pid[q], ST_LAUNCH_PEER_SIGNAL);
                deadline = now_s() + ST_LAUNCH_GRACE_S;
            }
        }
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    free(pid), free(done);
    return rc;
}
