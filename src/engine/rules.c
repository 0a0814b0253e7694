/* The rules every kind's check shares (engine.h): a destination's element type, asked dtype
 * and axes, its axes' lengths, the bytes of an array and its C-order strides, a base.  Below
 * every kind's file and the job's check (engine/job.c), which all use them. */
#include "engine/engine.h"

#include <math.h>

#include "engine/layout.h"

/* C-order strides of an array of its shape and type (saturated: the check refuses such
 * sizes). */
void sinpe_c_order(sinpe_array *a)
{
    int64_t stride = sinpe_type_size(a->type);
    for (int k = a->ndim - 1; k >= 0; k--) {
        int64_t n = a->shape[k] > 1 ? a->shape[k] : 1;
        a->strides[k] = stride;
        stride = stride > SINPE_MAX_SPAN / n ? SINPE_MAX_SPAN : stride * n;
    }
}

int sinpe_check_base(double base)
{
    return isfinite(base) && base > 0.0 ? SINPE_OK : SINPE_E_BASE;
}

int sinpe_check_dst(const sinpe_array *x, int want_type)
{
    if (x->readonly)
        return SINPE_E_READONLY;
    if ((int)x->type < 0 || x->type > SINPE_BF16)
        return SINPE_E_TYPE;
    if (want_type >= 0 && want_type != (int)x->type)
        return SINPE_E_DTYPE;
    if (x->ndim < 0 || x->ndim > SINPE_MAX_DIMS)
        return SINPE_E_DIMS;
    return SINPE_OK;
}

/* No axis of negative length (after the kinds' own rules on their sizes). */
int sinpe_check_axes(const sinpe_array *x)
{
    for (int k = 0; k < x->ndim; k++)
        if (x->shape[k] < 0)
            return SINPE_E_ROWS;
    return SINPE_OK;
}

/* Bytes of an array of `n` axes of `shape` and `w`-byte elements, or -1 past SINPE_MAX_SPAN
 * (the last axis first: one row must be addressable even in an empty array). */
int64_t sinpe_bytes_of(int n, const int64_t *shape, int64_t w)
{
    if (n > 0 && shape[n - 1] > SINPE_MAX_SPAN / w)
        return -1;
    int64_t b = n > 0 ? shape[n - 1] * w : w;
    for (int k = 0; k < n - 1; k++) {
        if (shape[k] == 0)
            return 0;
        if (b && shape[k] > SINPE_MAX_SPAN / b)
            return -1;
        b *= shape[k];
    }
    return n > 0 && shape[n - 1] == 0 ? 0 : b;
}
