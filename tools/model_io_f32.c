/* model_io_f32.c: the float32 twin of model_io (tools/model_io.c).
 *
 *   model_io_f32 DIR
 *
 * Reads DIR/weights.safetensors and DIR/batch.safetensors written by
 * model_io, runs the same forward, PPO loss and backward with the float
 * build of the library (the *_f32 symbols: this translation unit is float),
 * and writes DIR/outputs_f32.safetensors (values F64, computed in float) for
 * the float32 part of scripts/torch_parity.py. One precision per
 * translation unit is why this is a tool of its own. */
#define ST_REAL_BITS 32
#include "model_io.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: model_io_f32 DIR (a folder written by model_io)\n");
        return 2;
    }
    if (mio_run_dir(argv[1], "outputs_f32.safetensors", 1) != ST_OK) {
        fprintf(stderr, "model_io_f32: %s\n", st_last_error());
        return 1;
    }
    return 0;
}
