/* Strided layouts (engine layer, pure C): whether two elements share memory,
 * how far the elements reach, which axes merge, and a walker over them. */
#ifndef SINPE_LAYOUT_H
#define SINPE_LAYOUT_H

#include <stdint.h>

#include "sinpe.h"

/* No layout may reach further than this many bytes (no memory is that
 * large); it keeps every sum below exact in int64. */
#define SINPE_MAX_SPAN ((int64_t)1 << 60)

/* The byte offsets [lo, hi) that n axes of shape and strides (bytes) reach
 * from element 0, for elements of itemsize bytes; lo = hi = 0 when there are
 * no elements.  SINPE_E_SIZE when the span exceeds SINPE_MAX_SPAN. */
int sinpe_extent(int n, const int64_t *shape, const int64_t *strides, int64_t itemsize,
                 int64_t *lo, int64_t *hi);

/* SINPE_OK when no two elements share a byte, SINPE_E_OVERLAP when two do,
 * SINPE_E_UNDECIDED when the exact search exceeds its budget (strides
 * constructed to defeat it), SINPE_E_SIZE when the span is too large.
 * Exact: two distinct indices i, j share a byte iff
 * |sum_k (i_k - j_k) * strides[k]| < itemsize. */
int sinpe_overlap_check(int n, const int64_t *shape, const int64_t *strides, int64_t itemsize);

/* Merges axes that step through memory as one (C order), for up to two
 * stride arrays at once (s2 may be NULL), and drops axes of length 1;
 * returns the new number of axes.  Lengths must be > 0. */
int sinpe_collapse(int n, int64_t *shape, int64_t *s1, int64_t *s2);

/* Walks the indices of n axes in C order, keeping two byte offsets. */
typedef struct {
    int n;
    int64_t shape[SINPE_MAX_DIMS], s1[SINPE_MAX_DIMS], s2[SINPE_MAX_DIMS];
    int64_t idx[SINPE_MAX_DIMS];
    int64_t o1, o2;
} sinpe_walker;

/* Sets up the walker (s2 may be NULL) at flat index `at`. */
void sinpe_walker_init(sinpe_walker *w, int n, const int64_t *shape, const int64_t *s1,
                       const int64_t *s2, int64_t at);

static inline void sinpe_walker_next(sinpe_walker *w)
{
    for (int k = w->n - 1; k >= 0; k--) {
        w->o1 += w->s1[k];
        w->o2 += w->s2[k];
        if (++w->idx[k] < w->shape[k])
            return;
        w->o1 -= w->s1[k] * w->shape[k];
        w->o2 -= w->s2[k] * w->shape[k];
        w->idx[k] = 0;
    }
}

#endif
