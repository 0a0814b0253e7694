/* Code paths of the built-in backend (internal, pure C).
 *
 * One table of functions per path, in the path's own file: sinpe_scalar.c,
 * sinpe_avx2.c, sinpe_avx512.c, sinpe_neon.c.  sinpe_path_ops_get (sinpe_core.c) is the one
 * place that picks a table.  Every path gives the same bits: the vector
 * paths prove each lane correctly rounded or redo it with the scalar kernel.
 */
#ifndef SINPE_PATHS_H
#define SINPE_PATHS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "sinpe_core.h"

typedef struct {
    const char *name;
    /* 1 when this CPU (and OS) can run the path; called once, by the probe */
    int (*supported)(void);
    /* nrows rows of 2*half floats (sin, cos interleaved) at out + r*ostride
     * (floats); row r has position pos[r], or (float)(first_row + r) when
     * pos is NULL; div holds the half divisors, all in [dmin, dmax]. */
    void (*rows)(float *out, ptrdiff_t ostride, const float *pos, int64_t first_row,
                 int64_t nrows, const float *div, int64_t half, float dmin, float dmax);
    /* s[i] = sin(a[i]), c[i] = cos(a[i]), correctly rounded, i < n */
    void (*sincos)(const float *a, float *s, float *c, size_t n);
    /* dst[2i] = s[i], dst[2i+1] = c[i], i < n */
    void (*interleave)(const float *s, const float *c, float *dst, size_t n);
    /* x[i] += pe[i] (IEEE float32 adds), i < n */
    void (*add)(float *x, const float *pe, size_t n);
} sinpe_path_ops;

/* NULL when the path is not built in or this CPU cannot run it. */
const sinpe_path_ops *sinpe_path_ops_get(sinpe_path p);

extern const sinpe_path_ops sinpe_path_scalar;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SINPE_HAVE_AVX2_PATH 1
extern const sinpe_path_ops sinpe_path_avx2;
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SINPE_HAVE_AVX512_PATH 1
extern const sinpe_path_ops sinpe_path_avx512;
#endif
#if defined(__aarch64__)
#define SINPE_HAVE_NEON_PATH 1 /* Advanced SIMD is part of every AArch64 CPU */
extern const sinpe_path_ops sinpe_path_neon;
#endif

/* The scalar path's functions, for the vector paths' tails. */
void sinpe_sincos_scalar(const float *a, float *s, float *c, size_t n);

/* The vector paths test the range of their lanes only in rows whose angles
 * can leave [2^-120, 2^20): pos * div[j] lies between |pos|*dmin and
 * |pos|*dmax. */
static inline int sinpe_row_needs_range_test(float pos, float dmin, float dmax)
{
    double apos = fabs((double)pos);
    return !(apos * dmax < 0x1p20 * (1 - 0x1p-20) && apos * dmin > 0x1p-119);
}

#endif
