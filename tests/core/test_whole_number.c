/* test_whole_number.c: whole numbers from text keep every digit
 * (core/whole_number.h), and through the training config's JSON (a
 * checkpoint's config, config.json) a 64-bit seed survives the round trip.
 * Fuzzer regression (fuzz/fuzz_config.c, corpus huge-double-clip.json): a
 * double parameter of 1e58 must survive it too, not be taken for a
 * whole number that lost digits. */
#include "core/error.h"
#include "core/whole_number.h"
#include "test.h"
#include "train/train_config.h"

#include <stdlib.h>
#include <string.h>

static void check_parse(const char *text, int want_rc, long long want) {
    long long v = -7;
    int rc = st_parse_whole("x", text, &v);
    CHECK(rc == want_rc, "'%s': status %d, expected %d (%s)", text, rc, want_rc, st_last_error());
    if (rc == ST_OK) CHECK(v == want, "'%s' read as %lld, expected %lld", text, v, want);
    if (rc != ST_OK) CHECK(strstr(st_last_error(), text) != NULL, "'%s': the message does not name it: %s", text,
                           st_last_error());
    st_clear_error();
}

/* A config of one JSON object applied over the tiny defaults; the status. */
static int apply(const char *json, st_train_config *c) {
    CHECK(st_train_config_default(c, "tiny") == ST_OK, "defaults");
    int rc = st_train_config_apply_json(c, json, "t.json");
    if (rc == ST_OK) rc = st_train_config_validate(c);
    return rc;
}

/* to_json then apply again gives the same JSON (what a resume relies on). */
static void check_round_trip(const char *json, const char *what) {
    st_train_config c, back;
    int rc = apply(json, &c);
    CHECK(rc == ST_OK, "%s: refused: %s", what, st_last_error());
    if (rc != ST_OK) {
        st_clear_error();
        st_train_config_free(&c);
        return;
    }
    char *a = st_train_config_to_json(&c);
    rc = apply(a, &back);
    CHECK(rc == ST_OK, "%s: its own JSON is refused: %s", what, st_last_error());
    char *b = st_train_config_to_json(&back);
    CHECK(strcmp(a, b) == 0, "%s: the JSON changes in a round trip:\n%s\n---\n%s", what, a, b);
    free(a), free(b);
    st_train_config_free(&c), st_train_config_free(&back);
}

int main(void) {
    check_parse("42", ST_OK, 42);
    check_parse("-3", ST_OK, -3);
    check_parse("9007199254740993", ST_OK, 9007199254740993LL); /* 2^53 + 1: every digit */
    check_parse("9223372036854775807", ST_OK, 9223372036854775807LL);
    check_parse("1e6", ST_OK, 1000000);
    check_parse("2048.0", ST_OK, 2048);
    check_parse("9223372036854775808", ST_ERR_INPUT, 0);  /* out of range */
    check_parse("1e16", ST_ERR_INPUT, 0);                 /* past 2^53 as a double */
    check_parse("9.0071992547409920e+15", ST_ERR_INPUT, 0); /* 2^53 in a double's text */
    check_parse("1.5", ST_ERR_INPUT, 0);
    check_parse("inf", ST_ERR_INPUT, 0);
    check_parse("nan", ST_ERR_INPUT, 0);
    check_parse("", ST_ERR_INPUT, 0);
    check_parse("12abc", ST_ERR_INPUT, 0);

    char buf[64];
    st_json_number_text(3, buf, sizeof buf);
    CHECK(strcmp(buf, "3") == 0, "JSON 3 as text: '%s'", buf);
    st_json_number_text(9007199254740992.0, buf, sizeof buf);
    long long v;
    CHECK(st_parse_whole("seed", buf, &v) == ST_ERR_INPUT, "JSON 2^53 as text '%s' was taken as whole", buf);
    st_clear_error();

    /* the seed: a string keeps every digit; a JSON number that large is refused with the reason */
    st_train_config c;
    int rc = apply("{\"seed\": \"9007199254740993\"}", &c);
    CHECK(rc == ST_OK && c.seed == 9007199254740993LL, "seed string: status %d, seed %lld", rc, c.seed);
    st_train_config_free(&c);
    rc = apply("{\"seed\": 9007199254740993}", &c);
    CHECK(rc == ST_ERR_INPUT && strstr(st_last_error(), "2^53"), "seed number 2^53+1: status %d, message %s", rc,
          st_last_error());
    st_clear_error();
    st_train_config_free(&c);
    check_round_trip("{\"seed\": \"9007199254740993\"}", "seed 2^53 + 1");
    check_round_trip("{\"seed\": \"-9223372036854775807\"}", "seed -(2^63 - 1)");
    check_round_trip("{\"seed\": 123456789012345}", "a 15-digit seed as a number");
    check_round_trip("{\"clip\": \"88888888888888888888888888888888888888888888888888888888882\"}",
                     "clip 8.9e58 (the fuzzer's input)");
    TEST_MAIN_END();
}
