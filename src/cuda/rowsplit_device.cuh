/* rowsplit_device.cuh: the finish of a row-split reduction (cuda/linear_cuda.h's
 * st_rowsplit) done by the last block to write its partials, instead of a
 * separate finish kernel (a launch a reduction saved: ~3-5 us of latency
 * each, bench/notes-small.md).
 *
 * Every block of a group (the row splits of one column tile, say) writes
 * its partials, then takes a ticket: an atomic add on the group's counter
 * in the device's ticket array (cuda/linear_cuda.h st_rowsplit.tickets,
 * zero between reductions). The block that draws the last ticket sees
 * every other block's partials (each writer fenced them before its block
 * drew), sets the counter back to zero (so the next reduction, and a CUDA
 * graph's next replay, find it at zero) and adds the partials in the same
 * order as the finish kernel did: the same bits. Which block is last
 * changes from run to run; what it computes does not. */
#ifndef ST_ROWSPLIT_DEVICE_CUH
#define ST_ROWSPLIT_DEVICE_CUH

/* Whether this block drew the group's last of `members` tickets (the same
 * answer in every thread of the block). Every thread of the block must
 * call it, after its own partial stores. In the last block the counter is
 * back at zero and the other blocks' partials are visible to loads that
 * bypass L1 (__ldcg). */
static __device__ __forceinline__ bool st_rowsplit_last_block(unsigned *ticket, unsigned members) {
    __shared__ unsigned last;
    __threadfence(); /* this thread's partials, visible device-wide before its block's ticket */
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
        const unsigned t = atomicAdd(ticket, 1u);
        last = t == members - 1;
        if (last) atomicExch(ticket, 0u); /* every member has drawn: ready for the next reduction */
    }
    __syncthreads();
    const bool l = last != 0;
    if (l) __threadfence(); /* the others' partials before this block's loads of them */
    return l;
}

/* In the last block of a column tile whose block is cols_x x lanes threads
 * (x over the tile's columns, y over row lanes), buf a [lanes][cols_x]
 * shared double scratch: the sum over sp < splits, in split order from
 * zero, of parts[sp * ld + pc], returned in the threads of y = 0 (pc < 0:
 * no column, 0). A thread loads ST_ROWSPLIT_AHEAD splits before it adds
 * any (lanes x that many splits a round trip to L2, 64 at 16 lanes: one
 * round trip for the column sums' 64 splits), then the rounds go through
 * buf to the threads of y = 0 in order. Every thread of the block must
 * call it. */
enum { ST_ROWSPLIT_AHEAD = 4 };

/* The sum of p[0], p[ld], ..., p[(m - 1) ld] from zero in that order, by
 * one thread (loads that bypass L1, eight issued before their adds). */
static __device__ double st_rowsplit_add_run(const double *p, long ld, int m) {
    double t = 0;
    for (int s0 = 0; s0 < m; s0 += 8) {
        double v[8];
#pragma unroll
        for (int a = 0; a < 8; a++)
            v[a] = s0 + a < m ? __ldcg(p + (size_t)(s0 + a) * ld) : 0.0;
#pragma unroll
        for (int a = 0; a < 8; a++)
            if (s0 + a < m) t += v[a];
    }
    return t;
}
template <int LANES, int COLS>
static __device__ double st_rowsplit_add_splits(const double *parts, long ld, int splits, long pc,
                                                double (*buf)[COLS]) {
    double t = 0;
    for (int s0 = 0; s0 < splits; s0 += LANES * ST_ROWSPLIT_AHEAD) {
        double v[ST_ROWSPLIT_AHEAD];
#pragma unroll
        for (int a = 0; a < ST_ROWSPLIT_AHEAD; a++) {
            const int sp = s0 + a * LANES + (int)threadIdx.y;
            v[a] = pc >= 0 && sp < splits ? __ldcg(parts + (size_t)sp * ld + pc) : 0.0;
        }
#pragma unroll
        for (int a = 0; a < ST_ROWSPLIT_AHEAD; a++) {
            const int base = s0 + a * LANES;
            __syncthreads(); /* buf's previous round is read */
            buf[threadIdx.y][threadIdx.x] = v[a];
            __syncthreads();
            if (threadIdx.y == 0)
                for (int l = 0; l < LANES && base + l < splits; l++)
                    t += buf[l][threadIdx.x];
        }
    }
    return t;
}

#endif
