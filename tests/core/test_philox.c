/* test_philox.c: Philox4x32-10 against the published known-answer vectors,
 * and the stream/index independence the rest of the system relies on. */
#include "core/philox.h"
#include "test.h"

int main(void) {
    /* Known answers of Philox4x32-10 (Salmon et al., Random123 kat_vectors). */
    st_philox4 c0 = {{0, 0, 0, 0}};
    st_philox4 r0 = st_philox4x32(c0, 0, 0);
    CHECK(r0.v[0] == 0x6627e8d5u && r0.v[1] == 0xe169c58du && r0.v[2] == 0xbc57ac4cu && r0.v[3] == 0x9b00dbd8u,
          "zero vector: %08x %08x %08x %08x", r0.v[0], r0.v[1], r0.v[2], r0.v[3]);
    st_philox4 c1 = {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}};
    st_philox4 r1 = st_philox4x32(c1, 0xffffffffu, 0xffffffffu);
    CHECK(r1.v[0] == 0x408f276du && r1.v[1] == 0x41c83b0eu && r1.v[2] == 0xa20bc7c6u && r1.v[3] == 0x6d5451fdu,
          "ones vector: %08x %08x %08x %08x", r1.v[0], r1.v[1], r1.v[2], r1.v[3]);
    st_philox4 c2 = {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}};
    st_philox4 r2 = st_philox4x32(c2, 0xa4093822u, 0x299f31d0u);
    CHECK(r2.v[0] == 0xd16cfe09u && r2.v[1] == 0x94fdccebu && r2.v[2] == 0x5001e420u && r2.v[3] == 0x24126ea1u,
          "pi vector: %08x %08x %08x %08x", r2.v[0], r2.v[1], r2.v[2], r2.v[3]);

    /* Same (seed, stream, index) -> same bits; a different stream differs. */
    st_philox4 a = st_philox_draw(42, ST_STREAM_ACTION, 7), b = st_philox_draw(42, ST_STREAM_ACTION, 7);
    st_philox4 d = st_philox_draw(42, ST_STREAM_ENV_RESET, 7);
    CHECK(a.v[0] == b.v[0] && a.v[3] == b.v[3], "draws are not repeatable");
    CHECK(a.v[0] != d.v[0], "streams are not independent");

    /* Uniforms in range; normals with mean ~0 and variance ~1. */
    st_rng r = st_rng_make(1, ST_STREAM_TEST);
    double s = 0, s2 = 0;
    int n = 200000, bad = 0;
    for (int i = 0; i < n; i++) {
        double u = st_rng_uniform(&r);
        if (!(u >= 0 && u < 1)) bad++;
        double z = st_rng_normal(&r);
        s += z;
        s2 += z * z;
    }
    CHECK(bad == 0, "%d uniforms outside [0,1)", bad);
    CHECK(fabs(s / n) < 0.01 && fabs(s2 / n - 1) < 0.02, "normal moments %g %g", s / n, s2 / n);
    CHECK(st_u01f(0xffffffffu) < 1.0f && st_u01f_open0(0) > 0.0f, "float uniform bounds");
    TEST_MAIN_END();
}
