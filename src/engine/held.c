/* The held add (include/sinpe.h: sinpe_add_held): x += rows in every block of x's leading
 * axes, the rows a caller holds (a cache's, computed by a job before), on the calling thread.
 *
 * It is the ADD job's last step alone (engine/store.c: sinpe_emit, the same adds and
 * roundings), for the simplest layout only: x C-contiguous, rows float32 C-contiguous of
 * x's last two axes.  Its whole check is a few comparisons, so an add of a few thousand
 * values costs about what the adds cost; anything else is refused and goes a job's way. */
#include "engine/store.h"

static int c_contiguous(const sinpe_array *a)
{
    int64_t step = sinpe_type_size(a->type);
    for (int k = a->ndim - 1; k >= 0; k--) {
        if (a->shape[k] != 1 && a->strides[k] != step)
            return 0;
        step *= a->shape[k];
    }
    return 1;
}

/* The number of values, or -1 when an axis is empty or the bytes would not fit in int64. */
static int64_t values_of(const sinpe_array *a)
{
    int64_t n = 1;
    for (int k = 0; k < a->ndim; k++) {
        if (a->shape[k] <= 0 || a->shape[k] > INT64_MAX / 8 / n)
            return -1;
        n *= a->shape[k];
    }
    return n;
}

static int disjoint(const sinpe_array *x, const sinpe_array *rows, int64_t nx, int64_t nr)
{
    uintptr_t x0 = (uintptr_t)x->data, r0 = (uintptr_t)rows->data;
    uintptr_t x1 = x0 + (uintptr_t)nx * (uintptr_t)sinpe_type_size(x->type);
    return x1 <= r0 || r0 + (uintptr_t)nr * 4u <= x0;
}

static int held_check(const sinpe_array *x, const sinpe_array *rows)
{
    if (!x || !rows || (!x->data && x->ndim > 0) || !rows->data)
        return SINPE_E_NULL;
    if (x->ndim < 2 || x->ndim > SINPE_MAX_DIMS || rows->ndim != 2)
        return SINPE_E_DIMS;
    if (x->readonly)
        return SINPE_E_READONLY;
    if ((x->type != SINPE_F32 && x->type != SINPE_F64 && x->type != SINPE_F16
         && x->type != SINPE_BF16) || rows->type != SINPE_F32)
        return SINPE_E_TYPE;
    if (rows->shape[0] != x->shape[x->ndim - 2] || rows->shape[1] != x->shape[x->ndim - 1])
        return SINPE_E_SHAPE;
    int64_t nx = values_of(x), nr = values_of(rows);
    if (nx < 0 || nr < 0)
        return SINPE_E_SIZE; /* an empty x too: the job's way (nothing to add) */
    if (!c_contiguous(x) || !c_contiguous(rows)
        || (uintptr_t)x->data % (uintptr_t)sinpe_type_size(x->type) || (uintptr_t)rows->data % 4)
        return SINPE_E_KEPT;
    if (!disjoint(x, rows, nx, nr))
        return SINPE_E_OVERLAP;
    return SINPE_OK;
}

int sinpe_add_held(const sinpe_array *x, const sinpe_array *rows, int path)
{
    const sinpe_path_ops *ops = sinpe_paths_get(path);
    if (!ops)
        return SINPE_E_PATH;
    int st = held_check(x, rows);
    if (st != SINPE_OK)
        return st;
    int64_t n = values_of(rows), blocks = values_of(x) / n;
    int size = sinpe_type_size(x->type);
    sinpe_emitter e = { x->type, 1, size, x->type == SINPE_F32, ops }; /* aligned: checked */
    const float *pe = (const float *)rows->data;
    for (int64_t b = 0; b < blocks; b++)
        sinpe_emit(&e, (char *)x->data + b * n * size, pe, n);
    return SINPE_OK;
}
