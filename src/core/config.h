/* config.h: every size of the model, named as in DESIGN section 2.
 *
 * No dimension is a compile-time constant: each op takes its sizes from
 * here (or as arguments), and presets are just named sets of these values. */
#ifndef ST_CONFIG_H
#define ST_CONFIG_H

typedef struct {
    int B;       /* environments = action batch */
    int K;       /* window length (bars) */
    int F;       /* snapshot features */
    int C;       /* context features */
    int Dv;      /* VSN hidden */
    int D;       /* d_model */
    int L;       /* Mamba2 layers */
    int expand;  /* d_inner = expand * D */
    int headdim; /* P: head dimension; heads H = d_inner / headdim */
    int N;       /* SSM state size */
    int G;       /* B/C groups */
    int W;       /* causal conv width */
    int Q;       /* SSD chunk length */
    int Hh;      /* head MLP hidden */
    int A;       /* actions */
    int T;       /* rollout length per update */
} st_dims;

/* Derived sizes: one definition each. */
static inline int st_d_inner(const st_dims *d) { return d->expand * d->D; }
static inline int st_heads(const st_dims *d) { return st_d_inner(d) / d->headdim; }
static inline int st_sel_hidden(const st_dims *d) { return d->Dv < d->F ? d->Dv : d->F; } /* Hs */
static inline int st_row_width(const st_dims *d) { return d->F + d->C; } /* ENCODER_INPUT_DIM */
static inline int st_conv_dim(const st_dims *d) { return st_d_inner(d) + 2 * d->G * d->N; }
static inline int st_in_proj_out(const st_dims *d) { return 2 * st_d_inner(d) + 2 * d->G * d->N + st_heads(d); }

/* Fills d with preset "tiny", "default", "large" or "odd" (odd sizes for
 * tests: F=37, C=11, K=50, D=96, headdim=24). ST_ERR_INPUT otherwise. */
int st_dims_preset(const char *name, st_dims *d);
/* Checks that the sizes are usable together (positive, divisible...). */
int st_dims_validate(const st_dims *d);

#endif
