/* Strided layouts: extents, the exact overlap decision, axis merging and a
 * walker (engine/layout.h). */
#include "engine/layout.h"

#include <stdlib.h>

/* The overlap search visits at most this many nodes (about 20-40 ms);
 * ordinary and interleaved layouts need a few per axis. */
#define OVERLAP_BUDGET ((int64_t)1 << 22)

int64_t sinpe_elements(int n, const int64_t *shape)
{
    int64_t e = 1;
    for (int k = 0; k < n; k++) {
        if (shape[k] == 0)
            return 0;
        e = e > INT64_MAX / shape[k] ? INT64_MAX : e * shape[k];
    }
    return e;
}

int sinpe_extent(int n, const int64_t *shape, const int64_t *strides, int64_t itemsize,
                 int64_t *lo, int64_t *hi)
{
    int64_t neg = 0, pos = 0;
    *lo = *hi = 0;
    for (int k = 0; k < n; k++)
        if (shape[k] == 0)
            return SINPE_OK;
    for (int k = 0; k < n; k++) {
        if (shape[k] == 1)
            continue;
        int64_t s = strides[k];
        if (s == INT64_MIN)
            return SINPE_E_SIZE;
        int64_t a = s < 0 ? -s : s;
        if (a && shape[k] - 1 > SINPE_MAX_SPAN / a)
            return SINPE_E_SIZE;
        int64_t reach = (shape[k] - 1) * a;
        if (s < 0)
            neg += reach;
        else
            pos += reach;
        if (neg + pos > SINPE_MAX_SPAN)
            return SINPE_E_SIZE;
    }
    *lo = -neg;
    *hi = pos + itemsize;
    return SINPE_OK;
}

/* The search: is there d != 0 with |d_k| <= N[k] and |sum d_k s[k]| < w?
 * Axes in decreasing stride order; R[i] is what the axes after i can still
 * add, so at axis i only d with |S + d s[i]| <= w - 1 + R[i] can lead to a
 * solution.  The first nonzero d is taken positive (d and -d are the same
 * pair of elements). */
typedef struct {
    int n;
    int64_t N[SINPE_MAX_DIMS], s[SINPE_MAX_DIMS], R[SINPE_MAX_DIMS];
    int64_t w, work;
} search;

static int64_t floor_div(int64_t a, int64_t b) /* b > 0 */
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

static int64_t ceil_div(int64_t a, int64_t b) /* b > 0 */
{
    int64_t q = a / b;
    return (a % b != 0 && a > 0) ? q + 1 : q;
}

static int dfs(search *z, int i, int64_t S, int nonzero)
{
    if (++z->work > OVERLAP_BUDGET)
        return SINPE_E_UNDECIDED;
    if (i == z->n)
        return nonzero && S > -z->w && S < z->w ? SINPE_E_OVERLAP : SINPE_OK;
    int64_t lim = z->w - 1 + z->R[i], s = z->s[i];
    int64_t lo = ceil_div(-lim - S, s), hi = floor_div(lim - S, s);
    if (lo < -z->N[i])
        lo = -z->N[i];
    if (hi > z->N[i])
        hi = z->N[i];
    if (!nonzero && lo < 0)
        lo = 0;
    for (int64_t d = lo; d <= hi; d++) {
        int st = dfs(z, i + 1, S + d * s, nonzero || d != 0);
        if (st != SINPE_OK)
            return st;
    }
    return SINPE_OK;
}

static int by_stride_desc(const void *a, const void *b)
{
    const int64_t *x = a, *y = b; /* pairs (stride, N) */
    return (x[0] < y[0]) - (x[0] > y[0]);
}

int sinpe_overlap_check(int n, const int64_t *shape, const int64_t *strides, int64_t itemsize)
{
    int64_t lo, hi;
    int st = sinpe_extent(n, shape, strides, itemsize, &lo, &hi);
    if (st != SINPE_OK || hi == lo)
        return st; /* too large, or no elements */
    int64_t pairs[SINPE_MAX_DIMS][2];
    int m = 0;
    int64_t count = 1; /* saturates past the span */
    for (int k = 0; k < n; k++) {
        if (shape[k] == 1)
            continue;
        int64_t a = strides[k] < 0 ? -strides[k] : strides[k];
        if (a < itemsize) /* neighbours along this axis share a byte */
            return SINPE_E_OVERLAP;
        pairs[m][0] = a;
        pairs[m][1] = shape[k] - 1;
        m++;
        count = count > (hi - lo) / shape[k] ? hi - lo + 1 : count * shape[k];
    }
    /* pigeonhole: disjoint elements of itemsize bytes fit in the span */
    if (count > (hi - lo) / itemsize)
        return SINPE_E_OVERLAP;
    qsort(pairs, (size_t)m, sizeof pairs[0], by_stride_desc);
    search z;
    z.n = m;
    z.w = itemsize;
    z.work = 0;
    int64_t rest = 0;
    for (int i = m - 1; i >= 0; i--) {
        z.s[i] = pairs[i][0];
        z.N[i] = pairs[i][1];
        z.R[i] = rest;
        rest += z.N[i] * z.s[i]; /* <= the span, checked above */
    }
    return dfs(&z, 0, 0, 0);
}

int sinpe_collapse(int n, int64_t *shape, int64_t *s1, int64_t *s2)
{
    int m = 0;
    for (int k = 0; k < n; k++) {
        if (shape[k] == 1)
            continue;
        if (m > 0 && s1[m - 1] == s1[k] * shape[k] && (!s2 || s2[m - 1] == s2[k] * shape[k])) {
            shape[m - 1] *= shape[k]; /* axis m-1 steps over axis k whole */
            s1[m - 1] = s1[k];
            if (s2)
                s2[m - 1] = s2[k];
            continue;
        }
        shape[m] = shape[k];
        s1[m] = s1[k];
        if (s2)
            s2[m] = s2[k];
        m++;
    }
    return m;
}

void sinpe_walker_init(sinpe_walker *w, int n, const int64_t *shape, const int64_t *s1,
                       const int64_t *s2, int64_t at)
{
    w->n = n;
    w->o1 = w->o2 = 0;
    for (int k = n - 1; k >= 0; k--) {
        w->shape[k] = shape[k];
        w->s1[k] = s1[k];
        w->s2[k] = s2 ? s2[k] : 0;
        w->idx[k] = at % shape[k];
        at /= shape[k];
        w->o1 += w->idx[k] * w->s1[k];
        w->o2 += w->idx[k] * w->s2[k];
    }
}
