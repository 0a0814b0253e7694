/* A preset table's description compiled for the tile loop (engine layer, pure C):
 * engine/preset.c.  The angles each row computes (the distinct ones, when the backend's values
 * do not depend on their neighbours), and the columns as runs of copies from the sines,
 * cosines and angles, interleaved pairs, and zeros. */
#ifndef SINPE_ENGINE_PRESET_H
#define SINPE_ENGINE_PRESET_H

#include <stdint.h>

#include "paths/path.h"
#include "sinpe.h"

enum { SINPE_RUN_SIN = 0, SINPE_RUN_COS, SINPE_RUN_ANGLE, SINPE_RUN_ZERO, SINPE_RUN_PAIRS,
       SINPE_RUN_TWICE };

typedef struct {
    int op;          /* SINPE_RUN_*: PAIRS writes sin, cos, sin, cos, ... of len angles;
                        TWICE each of len values of kind twice (a0, a0, a1, a1, ...) */
    int kind;        /* TWICE: SINPE_RUN_SIN, COS or ANGLE */
    int64_t src, len; /* the first angle (of the computed ones) and the number of columns
                         (of angles for PAIRS) */
} sinpe_colrun;

typedef struct {
    int64_t K;           /* angles computed per row */
    const float *freq;   /* K float32 frequencies (or NULL with freq64) */
    const double *freq64;
    const int32_t *comp; /* K component indices, or NULL */
    int need_s, need_c;  /* some column takes a sine / a cosine */
    int64_t nruns;
    sinpe_colrun *runs;
    void *mem;
} sinpe_preset_prog;

/* dedup: the backend's values depend on nothing but the angle (not SLEEF's vectors), so
 * equal angles (same frequency and component) are computed once. */
int sinpe_preset_compile(const sinpe_preset *sp, int64_t ncols, int dedup, sinpe_preset_prog *pr);
void sinpe_preset_prog_free(sinpe_preset_prog *pr);

/* One row's columns from the computed angles a, sines s and cosines c. */
void sinpe_preset_gather(const sinpe_preset_prog *pr, const sinpe_path_ops *path, float *dst,
                       const float *a, const float *s, const float *c);

#endif
