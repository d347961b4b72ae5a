/* launch.h: `ssmtrade train --gpus N` on one host (issue 8): the launcher
 * process makes the NCCL unique id, starts N copies of this program with
 * the same arguments, one per GPU, and tells each its place through the
 * environment:
 *   SSMTRADE_RANK, SSMTRADE_WORLD, SSMTRADE_LOCAL_RANK (the GPU it uses),
 *   SSMTRADE_DIST_ID (the id as hex, dist/dist.h).
 * It stays alive while they run (NCCL's bootstrap root lives in the process
 * that made the id), forwards SIGINT / SIGTERM to them, and when one rank
 * dies or fails it says which and how, sends ST_LAUNCH_PEER_SIGNAL to the
 * others (a rank stuck in a collective with a dead peer never returns on
 * its own: st_rank_watch_peers makes it say so and leave at once) and
 * SIGKILL to any still alive after ST_LAUNCH_GRACE_S seconds: the run
 * stops within seconds and the last checkpoint, written atomically by rank
 * 0, is the one to resume from. Ranks die with the launcher (PDEATHSIG).
 *
 * Several hosts: under OpenMPI's mpirun the ranks read OMPI_COMM_WORLD_RANK,
 * _SIZE and _LOCAL_RANK instead, and the id comes from NCCL_COMM_ID
 * (<host of rank 0>:<free port>, passed with mpirun -x): NCCL derives the
 * same id from it in every rank and rank 0 serves the bootstrap, so no MPI
 * library is linked. mpirun itself ends the job when a rank dies. */
#ifndef ST_LAUNCH_H
#define ST_LAUNCH_H

#include <signal.h>

#define ST_LAUNCH_GRACE_S 5
#define ST_LAUNCH_PEER_SIGNAL SIGUSR1 /* the launcher to the other ranks: a peer failed */
#define ST_LAUNCH_PEER_EXIT 3         /* a rank's exit status when it leaves for that */

typedef struct {
    int rank, world, local_rank;
    const char *id_hex; /* NULL under mpirun without SSMTRADE_DIST_ID */
    int mpi;            /* started by OpenMPI's mpirun */
} st_rank_env;

/* *is_rank = 1 and *r filled when this process is a rank the launcher or
 * mpirun started (the variables above are set), 0 when they are absent.
 * ST_OK, or ST_ERR_INPUT naming the variable when one is malformed. */
int st_rank_from_env(st_rank_env *r, int *is_rank);

/* In a rank: on ST_LAUNCH_PEER_SIGNAL, one line on stderr ("rank R of W:
 * stopping: another rank failed ...") and exit ST_LAUNCH_PEER_EXIT at once
 * (async-signal-safe: write and _exit), or, between st_rank_defer_peers(1)
 * and (0) (a checkpoint being written), at the end of that window. */
void st_rank_watch_peers(int rank, int world);
void st_rank_defer_peers(int on);

/* Runs `world` ranks of argv (argv[0] .. NULL, this program's arguments)
 * with the NCCL unique id id_hex (st_dist_new_id, made in this process)
 * and waits for them; returns the process exit status: 0 when every rank
 * succeeded, else that of the first rank to fail (128 + signal when it was
 * killed; 130 / 143 when a forwarded SIGINT / SIGTERM stopped them), or 1
 * when the ranks could not be started (message in st_last_error()). */
int st_launch_ranks(int world, char **argv, const char *id_hex);

#endif
