/* params.h: the model's parameter table (DESIGN section 5), declared once.
 *
 * Every tensor has its checkpoint name, shape, offset into one flat buffer,
 * a weight-decay flag and an init rule. The same offsets address parameters,
 * gradients and the AdamW moments, so each of those is one allocation.
 * Names and shapes are exactly those of DESIGN section 5; the default preset
 * has 551,100 parameters. Precision-free: values live in the caller's
 * buffers (float for training, double for gradient checks). */
#ifndef ST_PARAMS_H
#define ST_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"

typedef enum {
    ST_INIT_ZERO,      /* biases of norms, embedding bias */
    ST_INIT_ONE,       /* norm weights, Dskip */
    ST_INIT_FANIN,     /* U(-1/sqrt(fan_in), 1/sqrt(fan_in)), PyTorch's Linear/Conv default */
    ST_INIT_FANIN_001, /* the same times 0.01: policy output, so the first policy is near uniform */
    ST_INIT_DT_BIAS,   /* inverse softplus of dt ~ log-uniform [1e-3, 1e-1] (Mamba2 reference) */
    ST_INIT_A_LOG,     /* log(U[1, 16]) (Mamba2 reference) */
} st_init_rule;

typedef struct {
    char name[48];
    int ndim;
    int shape[3];
    size_t offset; /* elements from the start of the flat buffer */
    size_t count;
    int decay;     /* AdamW weight decay applies (matrices only: not norms, biases, A_log, dt_bias, Dskip) */
    st_init_rule init;
    int fan_in;
} st_param;

typedef struct {
    int n;
    st_param *p;
    size_t total; /* elements */
} st_param_table;

/* Builds the table for sizes d (validated). Free with st_param_table_free. */
int st_param_table_build(const st_dims *d, st_param_table *t);
void st_param_table_free(st_param_table *t);
/* The entry named `name`, or NULL. */
const st_param *st_param_find(const st_param_table *t, const char *name);
/* Offset of `name`; the name must exist (a missing one is a bug of ours). */
size_t st_param_offset(const st_param_table *t, const char *name);
/* "[40, 8, 8]" */
void st_param_shape_str(const st_param *p, char *buf, size_t n);

/* Initial values from Philox stream ST_STREAM_INIT under seed, computed in
 * double and stored in float or double: the same numbers in both. */
void st_params_init_f32(const st_param_table *t, uint64_t seed, float *w);
void st_params_init_f64(const st_param_table *t, uint64_t seed, double *w);

#endif
