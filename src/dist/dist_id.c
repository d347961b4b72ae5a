/* dist_id.c: the unique id's hex form (dist.h); no NCCL needed. */
#include "dist/dist.h"

#include <string.h>

#include "core/error.h"

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

void st_dist_id_to_hex(const unsigned char id[ST_DIST_ID_BYTES], char hex[ST_DIST_ID_HEX]) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < ST_DIST_ID_BYTES; i++) {
        hex[2 * i] = digits[id[i] >> 4];
        hex[2 * i + 1] = digits[id[i] & 15];
    }
    hex[2 * ST_DIST_ID_BYTES] = 0;
}

int st_dist_id_from_hex(const char *hex, unsigned char id[ST_DIST_ID_BYTES]) {
    ST_REQUIRE(hex, ST_ERR_INPUT, "NCCL unique id: none given");
    size_t n = strlen(hex);
    ST_REQUIRE(n == 2 * ST_DIST_ID_BYTES, ST_ERR_INPUT, "NCCL unique id: %zu characters, expected %d hex digits", n,
               2 * ST_DIST_ID_BYTES);
    for (int i = 0; i < ST_DIST_ID_BYTES; i++) {
        int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
        ST_REQUIRE(hi >= 0 && lo >= 0, ST_ERR_INPUT, "NCCL unique id: '%c%c' at character %d is not hex",
                   hex[2 * i], hex[2 * i + 1], 2 * i);
        id[i] = (unsigned char)(hi << 4 | lo);
    }
    return ST_OK;
}
