/* Code paths of the built-in kernels (paths layer, pure C).
 *
 * One table of functions per path, each in its own file (paths/scalar.c, avx2.c,
 * avx512.c, neon.c); the vector paths write only their lane operations and a few lines, and
 * get their loops and their sin/cos from paths/body.h and paths/sincos_body.h, written once.  paths/registry.c is the one table of paths
 * and the one place that probes and picks them.  Every path gives the same bits: the vector
 * paths prove each lane correctly rounded or redo it with the scalar kernel, and
 * paths/records.c holds, in one table, the records of the exhaustive checks that showed it
 * for each path (machine-readable: the registry chooses a vector path by itself only when
 * its sin and cos records show 0 wrong of all 2^32 inputs).
 */
#ifndef SINPE_PATHS_PATH_H
#define SINPE_PATHS_PATH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* One exhaustive check of one function on one path (a row of paths/records.c). */
typedef struct {
    int path;            /* SINPE_PATH_* */
    const char *func;    /* "exp", "sin", "cos" */
    const char *cpu;     /* where it ran */
    const char *date;
    uint64_t inputs;     /* float32 inputs checked (2^32: all) */
    uint64_t wrong;      /* results not correctly rounded */
    double seconds;      /* at 2 threads */
    const char *command;
} sinpe_verification;

/* Rows of one rotation for rope_rows: row r of x at v + r * vstep, its cos/sin rows at
 * c + r * cstep and s + r * sstep (bytes; 0: one row for all), each as rope_half (n = h
 * pairs of halves) or rope_pairs (n interleaved pairs) reads it. */
typedef struct {
    char *v;
    const char *c, *s;
    ptrdiff_t vstep, cstep, sstep;
    size_t rows, n;
    int kind, tkind, pairs;
} sinpe_rope_rows;

typedef struct {
    /* 1 when this CPU (and OS) can run the path; called once, by the registry */
    int (*supported)(void);
    /* nrows rows of 2*half floats (sin, cos interleaved) at out + r*ostride (floats); row r
     * has position pos[r], or (float)(first_row + r) when pos is NULL; div holds the half
     * divisors, all in [dmin, dmax]. */
    void (*rows)(float *out, ptrdiff_t ostride, const float *pos, int64_t first_row,
                 int64_t nrows, const float *div, int64_t half, float dmin, float dmax);
    /* s[i] = sin(a[i]), c[i] = cos(a[i]), correctly rounded, i < n */
    void (*sincos)(const float *a, float *s, float *c, size_t n);
    /* dst[2i] = s[i], dst[2i+1] = c[i], i < n */
    void (*interleave)(const float *s, const float *c, float *dst, size_t n);
    /* x[i] += pe[i] (IEEE float32 adds), i < n */
    void (*add)(float *x, const float *pe, size_t n);
    /* dst[i] = k * f[i] (IEEE float32 products), i < n: a preset's angles of one position */
    void (*scale)(float *dst, const float *f, float k, size_t n);
    /* n contiguous float16 (kind SINPE_HALF_F16) or bfloat16 (SINPE_HALF_BF16) values at
     * dst (2-byte aligned): dst[i] = r(pe[i]), or with add dst[i] = r(w(dst[i]) + pe[i]),
     * w widening exactly and r rounding as elem/half.h does */
    void (*half)(void *dst, const float *pe, size_t n, int kind, int add);
    /* transformers' rotate_half on one contiguous vector of kind SINPE_HALF_F32, F16 or
     * BF16: halves a = v[i], b = v[h + i] (i < h) become
     *   r(r(a * r(c[i])) + r(-b * r(s[i]))) and r(r(b * r(c[h+i])) + r(a * r(s[h+i])))
     * with r rounding to the kind (the identity for float32), every op its own.  The
     * contiguous cos/sin rows c and s hold float32 values (tkind SINPE_HALF_F32) or values
     * of the kind itself (tkind == kind: widened exactly, their r is the identity); other
     * pairs are the caller's to widen. */
    void (*rope_half)(void *v, const void *c, const void *s, size_t h, int kind, int tkind);
    /* rotary-embedding-torch's pairs on one contiguous vector of kind SINPE_HALF_F32, F16 or
     * BF16: n pairs a = v[2i], b = v[2i+1] become
     *   r(a * c[2i] + (-b) * s[2i]) and r(b * c[2i+1] + a * s[2i+1])
     * in float32 (torch's NaN rule: each step keeps its second operand's NaN), rounded once
     * to the kind by r.  The rows c and s: float32 (tkind SINPE_HALF_F32) or the kind's own
     * values (tkind == kind), not rounded. */
    void (*rope_pairs)(void *v, const void *c, const void *s, size_t n, int kind, int tkind);
    /* rope_half or rope_pairs on r->rows rows at once (one call and one dispatch for a run of
     * x's vectors: the heads of a position, or a head's positions) */
    void (*rope_rows)(const sinpe_rope_rows *r);
} sinpe_path_ops;

/* The code paths by index, fastest last among those a CPU has: the one list of their names
 * (the registry, the public API and, through the binding's PATHS, the package read it). */
#define SINPE_PATH_LIST(X) X(SCALAR, "scalar") X(AVX2, "avx2") X(AVX512, "avx512") X(NEON, "neon")
#define SINPE_PATH_ENUM_(id, name) SINPE_PATH_##id,
enum { SINPE_PATH_LIST(SINPE_PATH_ENUM_) SINPE_PATH_COUNT };

/* The records (paths/records.c): record k (0, 1, ...) of path p, built in or not; NULL
 * past its last. */
const sinpe_verification *sinpe_records_nth(int p, int k);

/* The registry (paths/registry.c). */
int sinpe_paths_count(void);
const char *sinpe_paths_name(int p);             /* every path's, built in or not */
const sinpe_path_ops *sinpe_paths_entry(int p); /* NULL when not built in */
const sinpe_path_ops *sinpe_paths_get(int p);   /* NULL unless built in and supported here */
/* record k (0, 1, ...) of a built-in path; NULL past its last, or when not built in */
const sinpe_verification *sinpe_paths_record(int p, int k);
int sinpe_paths_verified(int p);                /* sin and cos: 0 wrong of 2^32 on record */
int sinpe_paths_best(void);                     /* the last available and verified path */

/* Kinds of the element conversions (half, rope_half). */
enum { SINPE_HALF_F32 = 0, SINPE_HALF_F16 = 1, SINPE_HALF_BF16 = 2 };

/* The scalar path's block sin/cos, conversions and rotation, for the vector paths' tails
 * and for paths without vector conversions. */
void sinpe_sincos_scalar(const float *a, float *s, float *c, size_t n);
void sinpe_half_scalar(void *dst, const float *pe, size_t n, int kind, int add);
void sinpe_rope_half_scalar(void *v, const void *c, const void *s, size_t h, int kind, int tkind);
void sinpe_rope_pairs_scalar(void *v, const void *c, const void *s, size_t n, int kind, int tkind);
void sinpe_rope_rows_scalar(const sinpe_rope_rows *r);
/* rope_pairs on n pairs of a vector whose element k is at x + k * step (bytes), with float32
 * rows c and s */
void sinpe_rope_pairs_span(char *x, ptrdiff_t step, const float *c, const float *s, size_t n,
                           int kind);
void sinpe_rope_span_scalar(char *x0, char *x1, const float *c0, const float *c1,
                            const float *s0, const float *s1, size_t n, int kind);
void sinpe_rope_span_typed(char *x0, char *x1, const char *c0, const char *c1, const char *s0,
                           const char *s1, size_t n, int kind, int tkind);

/* The vector paths test the range of their lanes only in rows whose angles can leave
 * [2^-120, 2^20): pos * div[j] lies between |pos|*dmin and |pos|*dmax. */
static inline int sinpe_row_needs_range_test(float pos, float dmin, float dmax)
{
    double apos = fabs((double)pos);
    return !(apos * dmax < 0x1p20 * (1 - 0x1p-20) && apos * dmin > 0x1p-119);
}

#endif
