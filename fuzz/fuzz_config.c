/* fuzz_config.c: libFuzzer harness of the JSON config reader
 * (st_train_config_apply_json, train/train_config.h).
 *
 * The input is the text of a config file (keys = flag names). It is applied
 * over the defaults of the tiny preset, then validated. A rejection must be
 * ST_ERR_INPUT with a message. An accepted config must survive the trip
 * that a checkpoint gives it: st_train_config_to_json, applied again over the
 * defaults, gives the same JSON text (a fixed point), so that a resumed run
 * gets the config of the run that wrote it. Broken promises abort. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "train/train_config.h"

#define FUZZ_NAME "fuzz_config"
#include "fuzz_assert.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *json = malloc(size + 1); /* the reader takes a C string */
    if (!json) return 0;
    memcpy(json, data, size);
    json[size] = '\0';

    st_train_config c;
    FUZZ_ASSERT(st_train_config_default(&c, "tiny") == ST_OK, "defaults: %s", st_last_error());
    st_clear_error();
    int rc = st_train_config_apply_json(&c, json, "fuzz.json");
    if (rc == ST_OK) {
        st_clear_error();
        rc = st_train_config_validate(&c);
    }
    if (rc != ST_OK) {
        FUZZ_ASSERT(rc == ST_ERR_INPUT && st_last_error()[0], "status %d, message '%s'", rc, st_last_error());
    } else {
        char *a = st_train_config_to_json(&c);
        FUZZ_ASSERT(a, "st_train_config_to_json failed");
        st_train_config back;
        FUZZ_ASSERT(st_train_config_default(&back, "tiny") == ST_OK, "defaults");
        rc = st_train_config_apply_json(&back, a, "round trip");
        FUZZ_ASSERT(rc == ST_OK, "the JSON of an accepted config is refused: %s\n%s", st_last_error(), a);
        rc = st_train_config_validate(&back);
        FUZZ_ASSERT(rc == ST_OK, "the round trip of an accepted config is invalid: %s\n%s", st_last_error(), a);
        char *b = st_train_config_to_json(&back);
        FUZZ_ASSERT(b && strcmp(a, b) == 0, "the config changes in a round trip:\n%s\n---\n%s", a, b ? b : "(null)");
        free(a);
        free(b);
        st_train_config_free(&back);
    }
    st_train_config_free(&c);
    free(json);
    return 0;
}
