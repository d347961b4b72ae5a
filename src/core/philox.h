/* philox.h: Philox4x32-10, the counter-based generator behind all randomness.
 *
 * A draw is a pure function of (key, counter): key = the run's seed,
 * counter = (index lo, index hi, stream, 0). The same call on the CPU and in
 * a CUDA kernel gives the same bits, so both backends see the same numbers
 * (DESIGN section 7). Streams separate uses (init, env resets, actions...);
 * the index counts draws within a stream. Header-only so that CUDA sources
 * can include it. */
#ifndef ST_PHILOX_H
#define ST_PHILOX_H

#include <stdint.h>

#if defined(__CUDACC__)
#define ST_HD __host__ __device__ __forceinline__
#else
#define ST_HD static inline
#endif

typedef struct {
    uint32_t v[4];
} st_philox4;

ST_HD uint32_t st_mulhilo32(uint32_t a, uint32_t b, uint32_t *hi) {
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

/* The raw generator: 10 rounds of Philox4x32 over counter c with key k. */
ST_HD st_philox4 st_philox4x32(st_philox4 c, uint32_t k0, uint32_t k1) {
    for (int round = 0; round < 10; round++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = st_mulhilo32(0xD2511F53u, c.v[0], &hi0);
        uint32_t lo1 = st_mulhilo32(0xCD9E8D57u, c.v[2], &hi1);
        st_philox4 n;
        n.v[0] = hi1 ^ c.v[1] ^ k0;
        n.v[1] = lo1;
        n.v[2] = hi0 ^ c.v[3] ^ k1;
        n.v[3] = lo0;
        c = n;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return c;
}

/* Four 32-bit draws number `index` of `stream` under `seed`. */
ST_HD st_philox4 st_philox_draw(uint64_t seed, uint32_t stream, uint64_t index) {
    st_philox4 c;
    c.v[0] = (uint32_t)index;
    c.v[1] = (uint32_t)(index >> 32);
    c.v[2] = stream;
    c.v[3] = 0;
    return st_philox4x32(c, (uint32_t)seed, (uint32_t)(seed >> 32));
}

/* Uniform in [0, 1) from 32 bits, exactly representable in float (24 bits). */
ST_HD float st_u01f(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }
/* Uniform in (0, 1] (safe for log), 24 bits. */
ST_HD float st_u01f_open0(uint32_t x) { return ((float)(x >> 8) + 1.0f) * (1.0f / 16777216.0f); }
/* Uniform in [0, 1) with 53 bits from two draws, for double-precision uses. */
ST_HD double st_u01d(uint32_t a, uint32_t b) {
    uint64_t m = ((uint64_t)(a >> 5) << 26) | (uint64_t)(b >> 6);
    return (double)m * (1.0 / 9007199254740992.0);
}

/* Named streams: one per use, so that adding draws in one place never shifts
 * another's numbers. */
enum {
    ST_STREAM_INIT = 1,       /* parameter initialisation */
    ST_STREAM_ENV_RESET = 2,  /* episode (instrument, start) draws */
    ST_STREAM_ACTION = 3,     /* action sampling */
    ST_STREAM_MINIBATCH = 4,  /* minibatch permutations */
    ST_STREAM_MARKET = 5,     /* synthetic market generation */
    ST_STREAM_TEST = 6,       /* test inputs */
    ST_STREAM_EVAL = 7,       /* evaluation sampling and baselines */
};

/* A sequential convenience over one stream, for host code that draws in a
 * loop: each call consumes one counter value and returns its four words. */
typedef struct {
    uint64_t seed;
    uint32_t stream;
    uint64_t index;
} st_rng;

static inline st_rng st_rng_make(uint64_t seed, uint32_t stream) {
    st_rng r = {seed, stream, 0};
    return r;
}
static inline st_philox4 st_rng_next4(st_rng *r) { return st_philox_draw(r->seed, r->stream, r->index++); }
/* One uniform double in [0, 1) (53 bits). */
static inline double st_rng_uniform(st_rng *r) {
    st_philox4 d = st_rng_next4(r);
    return st_u01d(d.v[0], d.v[1]);
}
/* One standard normal (Box-Muller on 53-bit uniforms). */
double st_rng_normal(st_rng *r);
/* Uniform integer in [0, n), n > 0 (rejection-free multiply-shift; bias < 2^-32). */
static inline uint32_t st_rng_below(st_rng *r, uint32_t n) {
    st_philox4 d = st_rng_next4(r);
    return (uint32_t)(((uint64_t)d.v[0] * (uint64_t)n) >> 32);
}

#endif
