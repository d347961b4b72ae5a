/* ssd_scan_quad_fwd.cuh: the tile work of the quad forward
 * (model/ssd_scan_quad.cu) on raw TF32 mma.sync m16n8k8 fragments: rows'
 * staging by cp.async, a G = C B^T tile, and a Y row tile whose M = G o L o
 * dt is formed in registers, straight into the A fragments, never stored.
 * Fragment layouts (PTX ISA, m16n8k8 .tf32, g = lane / 4, q = lane % 4):
 * A a0 (g, q), a1 (g+8, q), a2 (g, q+4), a3 (g+8, q+4); B b0 (q, g),
 * b1 (q+4, g); C c0, c1 (g, 2q..2q+1), c2, c3 (g+8, 2q..2q+1). The k index
 * of an 8-wide step is permuted: logical k = q reads column 2q of the step,
 * k = q+4 column 2q+1 (the same sum over the same 8 terms), so that a
 * lane's two A values of a row, its two cum and dt values, are adjacent:
 * one 8- or 16-byte load each. Shared strides (floats): B, C rows N + 8, G
 * rows K + 8 (float2 loads at 8g + 2q: no bank conflict), X rows R P + 4
 * (b0 at rows 2q: banks 8q + g). Every value is rounded to TF32 by
 * cvt.rna (wmma::__float_to_tf32's rounding); M's elements are decay_tile's
 * and quad_decays' expression, (G expf((float)(cum[t] - cum[s]))) dt[s].
 * CUDA sources only. */
#ifndef ST_SSD_SCAN_QUAD_FWD_CUH
#define ST_SSD_SCAN_QUAD_FWD_CUH

#include <stddef.h>
#include <stdint.h>

#include <cuda_pipeline.h>

#include "cuda/ssd_device.cuh"

/* x rounded to TF32 (round to nearest, ties away), as the MMA's operand bits. */
__device__ static inline uint32_t qf_tf32(float x) {
    uint32_t u;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(x));
    return u;
}

/* d += A B over one 16 x 8 x 8 step. */
__device__ static inline void qf_mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* rows x cols floats of src (global, row stride ld) into dst (shared, row
 * stride dld) by the block's cp.async copies: 16 bytes each where vec
 * (cols, ld multiples of 4, src 16-byte aligned), else 4. A thread's
 * copies step by the block's size with their addresses carried from one
 * copy to the next (no division or 64-bit product a copy; a warp a row
 * instead measured slower: bench/notes-quadfwd.md). The caller commits,
 * waits and synchronises. */
__device__ static inline void qf_stage(const float *src, int ld, int rows, int cols, float *dst, int dld, int vec) {
    const int w = vec ? 4 : 1, per = cols / w, total = rows * per, n = (int)blockDim.x;
    const int dr = n / per, dc = n % per;
    int c = (int)threadIdx.x % per;
    const int r = (int)threadIdx.x / per;
    const float *f = src + (size_t)r * ld + c * w;
    float *t = dst + r * dld + c * w;
    const size_t fstep = (size_t)dr * ld + (size_t)dc * w, fwrap = (size_t)ld - (size_t)per * w;
    const int tstep = dr * dld + dc * w, twrap = dld - per * w;
    if (vec) {
        for (int i = (int)threadIdx.x; i < total; i += n) {
            __pipeline_memcpy_async(t, f, 16);
            f += fstep, t += tstep, c += dc;
            if (c >= per) c -= per, f += fwrap, t += twrap;
        }
    } else {
        for (int i = (int)threadIdx.x; i < total; i += n) {
            __pipeline_memcpy_async(t, f, sizeof(float));
            f += fstep, t += tstep, c += dc;
            if (c >= per) c -= per, f += fwrap, t += twrap;
        }
    }
}

/* A warp: tc_decay_prefix (ssd_scan_tc_tile.cuh) for K <= 64 rows, the
 * same sums in the same order (the same bits): cum[i] = sum_{j<=i} dt_j A
 * in double by an inclusive shuffle scan over 32 rows a segment with a
 * carry, dtf[i] = dt_i; both segments' dt loaded before the first shuffle
 * (one global round trip, not one a segment). dth: the head's dt of row
 * 0, ld floats a row. */
__device__ static inline void qf_prefix(const float *dth, size_t ld, int K, double A, double *cum, float *dtf,
                                        int lane) {
    const float dt0 = lane < K ? dth[(size_t)lane * ld] : 0.0f;
    const float dt1 = lane + 32 < K ? dth[(size_t)(lane + 32) * ld] : 0.0f;
    double carry = 0;
    for (int i0 = 0; i0 < K; i0 += 32) {
        const int i = i0 + lane;
        const float dt = i0 ? dt1 : dt0;
        const double v = warp_prefix_step((double)dt * A, carry, lane);
        if (i < K) cum[i] = v, dtf[i] = dt;
    }
}

/* G's tile (ti, tj) = C B^T over N, rows 16 ti.., columns 16 tj.., raw
 * (float accumulators) into G (stride lm). Cs, Bs: the window's rows
 * (stride ldn). Two n8 halves, N / 8 steps. */
__device__ static inline void qf_g_tile(const float *Cs, const float *Bs, int ldn, int N, float *G, int lm, int ti,
                                        int tj, int lane) {
    const int g = lane >> 2, q = lane & 3;
    const float *c0 = Cs + (16 * ti + g) * ldn + 2 * q, *c1 = c0 + 8 * ldn;
    const float *b0 = Bs + (16 * tj + g) * ldn + 2 * q, *b1 = b0 + 8 * ldn;
    float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll 4
    for (int k = 0; k < N; k += 8) {
        const float2 ca = *(const float2 *)(c0 + k), cb = *(const float2 *)(c1 + k);
        const float2 ba = *(const float2 *)(b0 + k), bb = *(const float2 *)(b1 + k);
        const uint32_t af[4] = {qf_tf32(ca.x), qf_tf32(cb.x), qf_tf32(ca.y), qf_tf32(cb.y)};
        qf_mma(acc[0], af, qf_tf32(ba.x), qf_tf32(ba.y));
        qf_mma(acc[1], af, qf_tf32(bb.x), qf_tf32(bb.y));
    }
    float *o = G + (16 * ti + g) * lm + 16 * tj + 2 * q;
#pragma unroll
    for (int nt = 0; nt < 2; nt++) {
        *(float2 *)(o + 8 * nt) = make_float2(acc[nt][0], acc[nt][1]);
        *(float2 *)(o + 8 * lm + 8 * nt) = make_float2(acc[nt][2], acc[nt][3]);
    }
}

/* M's element (t, s) of a head: decay_tile's expression. ct = cum[t]. */
__device__ static inline float qf_m(float gv, double ct, double cs, float ds) {
    return gv * expf((float)(ct - cs)) * ds;
}

/* acc[nt] += A X over one step: X at the step's row 2q (this lane's
 * column g of n8 tile 0; tile nt 8 nt further, row 2q+1 lx further). */
template <int NT>
__device__ static inline void qf_step_x(float (&acc)[NT][4], const uint32_t (&af)[4], const float *xs, int lx) {
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
        qf_mma(acc[nt], af, qf_tf32(xs[8 * nt]), qf_tf32(xs[lx + 8 * nt]));
}

/* One Y row tile of a head: rows 16 ti .. 16 ti + 15, the 8 NT columns of
 * a slab: Y = D X + M X over s < 16 (ti + 1) (the diagonal tile's upper
 * part 0, as M's), stored to y (global: the window's row 0 at this
 * head's and slab's column, row stride ys; float2 stores where vec2: ys
 * even, y 8-byte aligned). X: the slab's column 0 in shared memory
 * (stride lx); G (stride lm), cum and dt: the head's, shared. */
template <int NT>
__device__ static inline void qf_y_tile(const float *X, int lx, const float *G, int lm, const double *cum,
                                        const float *dt, int ti, float D, float *y, int ys, int vec2, int lane) {
    const int g = lane >> 2, q = lane & 3, r0 = 16 * ti + g, r1 = r0 + 8;
    float acc[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; nt++) { /* D x, elementwise */
        const float2 u = *(const float2 *)(X + r0 * lx + 8 * nt + 2 * q);
        const float2 v = *(const float2 *)(X + r1 * lx + 8 * nt + 2 * q);
        acc[nt][0] = D * u.x, acc[nt][1] = D * u.y, acc[nt][2] = D * v.x, acc[nt][3] = D * v.y;
    }
    const double c0 = cum[r0], c1 = cum[r1];
    const float *g0 = G + r0 * lm + 2 * q, *g1 = G + r1 * lm + 2 * q;
    const float *xs = X + 2 * q * lx + g;
    const int kd = 16 * ti; /* the diagonal tile's first column */
#pragma unroll 2
    for (int s0 = 0; s0 < kd; s0 += 8) { /* below the diagonal tile: every s < t */
        const int s = s0 + 2 * q;
        const double2 cs = *(const double2 *)(cum + s);
        const float2 ds = *(const float2 *)(dt + s);
        const float2 ga = *(const float2 *)(g0 + s0), gb = *(const float2 *)(g1 + s0);
        const uint32_t af[4] = {qf_tf32(qf_m(ga.x, c0, cs.x, ds.x)), qf_tf32(qf_m(gb.x, c1, cs.x, ds.x)),
                                qf_tf32(qf_m(ga.y, c0, cs.y, ds.y)), qf_tf32(qf_m(gb.y, c1, cs.y, ds.y))};
        qf_step_x<NT>(acc, af, xs + s0 * lx, lx);
    }
    { /* the diagonal tile's left half: row r1 whole, row r0 where s <= r0 */
        const int s = kd + 2 * q;
        const double2 cs = *(const double2 *)(cum + s);
        const float2 ds = *(const float2 *)(dt + s);
        const float2 ga = *(const float2 *)(g0 + kd), gb = *(const float2 *)(g1 + kd);
        const uint32_t af[4] = {s <= r0 ? qf_tf32(qf_m(ga.x, c0, cs.x, ds.x)) : 0u, qf_tf32(qf_m(gb.x, c1, cs.x, ds.x)),
                                s + 1 <= r0 ? qf_tf32(qf_m(ga.y, c0, cs.y, ds.y)) : 0u,
                                qf_tf32(qf_m(gb.y, c1, cs.y, ds.y))};
        qf_step_x<NT>(acc, af, xs + kd * lx, lx);
    }
    { /* its right half: row r0 none (s > r0), row r1 where s <= r1 */
        const int s = kd + 8 + 2 * q;
        const double2 cs = *(const double2 *)(cum + s);
        const float2 ds = *(const float2 *)(dt + s);
        const float2 gb = *(const float2 *)(g1 + kd + 8);
        const uint32_t af[4] = {0u, s <= r1 ? qf_tf32(qf_m(gb.x, c1, cs.x, ds.x)) : 0u, 0u,
                                s + 1 <= r1 ? qf_tf32(qf_m(gb.y, c1, cs.y, ds.y)) : 0u};
        qf_step_x<NT>(acc, af, xs + (kd + 8) * lx, lx);
    }
    float *o0 = y + (size_t)r0 * ys + 2 * q, *o1 = y + (size_t)r1 * ys + 2 * q;
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        if (vec2) {
            *(float2 *)(o0 + 8 * nt) = make_float2(acc[nt][0], acc[nt][1]);
            *(float2 *)(o1 + 8 * nt) = make_float2(acc[nt][2], acc[nt][3]);
        } else {
            o0[8 * nt] = acc[nt][0], o0[8 * nt + 1] = acc[nt][1];
            o1[8 * nt] = acc[nt][2], o1[8 * nt + 1] = acc[nt][3];
        }
    }
}

#endif
