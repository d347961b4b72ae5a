/* test_dist_id.c: the NCCL unique id's hex form (dist/dist.h), which a
 * launcher passes to every rank: every byte survives the round trip, and
 * text that is not 256 hex digits is refused with what is wrong. */
#include "core/error.h"
#include "core/philox.h"
#include "dist/dist.h"
#include "test.h"

#include <string.h>

static void refused(const char *hex, const char *want, const char *what) {
    unsigned char id[ST_DIST_ID_BYTES];
    int rc = st_dist_id_from_hex(hex, id);
    CHECK(rc == ST_ERR_INPUT && strstr(st_last_error(), want), "%s: status %d, message '%s' (want '%s')", what, rc,
          st_last_error(), want);
    st_clear_error();
}

int main(void) {
    unsigned char id[ST_DIST_ID_BYTES], back[ST_DIST_ID_BYTES];
    char hex[ST_DIST_ID_HEX];
    for (int trial = 0; trial < 16; trial++) {
        st_rng r = st_rng_make(99, ST_STREAM_TEST);
        r.index = (uint64_t)trial << 32;
        for (int i = 0; i < ST_DIST_ID_BYTES; i++) id[i] = (unsigned char)st_rng_below(&r, 256);
        if (trial == 0) memset(id, 0, sizeof id);
        if (trial == 1) memset(id, 0xff, sizeof id);
        st_dist_id_to_hex(id, hex);
        CHECK(strlen(hex) == 2 * ST_DIST_ID_BYTES, "trial %d: %zu hex characters", trial, strlen(hex));
        memset(back, 0x5a, sizeof back);
        CHECK(st_dist_id_from_hex(hex, back) == ST_OK, "trial %d: %s", trial, st_last_error());
        CHECK(memcmp(id, back, sizeof id) == 0, "trial %d: the id changed in the round trip", trial);
    }
    /* upper-case digits read the same */
    for (char *p = hex; *p; p++)
        if (*p >= 'a' && *p <= 'f') *p = (char)(*p - 'a' + 'A');
    CHECK(st_dist_id_from_hex(hex, back) == ST_OK && memcmp(id, back, sizeof id) == 0, "upper-case hex: %s",
          st_last_error());
    refused(NULL, "none given", "NULL");
    refused("", "0 characters, expected 256 hex digits", "empty");
    refused("abc", "3 characters", "short");
    char bad[ST_DIST_ID_HEX + 1];
    memset(bad, '0', 2 * ST_DIST_ID_BYTES);
    bad[2 * ST_DIST_ID_BYTES] = 0;
    bad[10] = 'g';
    refused(bad, "'g0' at character 10 is not hex", "a g");
    bad[10] = '0';
    bad[2 * ST_DIST_ID_BYTES] = '0', bad[2 * ST_DIST_ID_BYTES + 1] = 0;
    refused(bad, "257 characters", "long");
    printf("NCCL in this build: %s (%s)\n", st_dist_available() ? "yes" : "no", st_dist_describe());
    TEST_MAIN_END();
}
