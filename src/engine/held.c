/* The held add (include/sinpe.h: sinpe_add_held): x += rows in every block of x's leading
 * axes, the rows a caller holds (a cache's, computed by a job before), on the calling thread
 * or, from a size on, on more (in segments of rows, each added as a block's would be).
 *
 * It is the ADD job's last step alone (engine/store.c: sinpe_emit, the same adds and
 * roundings), for the simplest layout only: x C-contiguous, rows float32 C-contiguous of
 * x's last two axes.  Its whole check is a few comparisons, so an add of a few thousand
 * values costs about what the adds cost; anything else is refused and goes a job's way. */
#include "engine/engine.h"
#include "engine/store.h"
#include "platform/threads.h"

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
    for (int k = 0; k < a->ndim; k++)
        if (a->shape[k] <= 0)
            return -1;
    int64_t n = sinpe_elements(a->ndim, a->shape);
    return n > INT64_MAX / 8 ? -1 : n;
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

/* Values per item: whole vectors of every path, 128 KiB of float32. */
#define HELD_SEGMENT ((int64_t)32768)

/* A second thread pays from this many values: on an adopted OpenMP runtime (torch's spinning
 * workers; Zen 4, 2 threads, against torch's add_ of a held bfloat16 buffer: 1 x 1024 x 1024
 * 130 -> 70 us; 2 x 256 x 768 53 -> 31 us), else where a kept-rows add pays (engine.h). */
#define HELD_OPENMP_VALUES ((int64_t)1 << 17)

typedef struct {
    sinpe_emitter e;
    char *x;
    const float *pe;
    int64_t n, per_block; /* values per block, items per block */
} held_ctx;

static void held_task(void *ctx, int64_t begin, int64_t end, int tid)
{
    const held_ctx *h = ctx;
    (void)tid;
    for (int64_t i = begin; i < end; i++) {
        int64_t b = i / h->per_block, k0 = i % h->per_block * HELD_SEGMENT;
        int64_t k1 = k0 + HELD_SEGMENT < h->n ? k0 + HELD_SEGMENT : h->n;
        sinpe_emit(&h->e, h->x + (b * h->n + k0) * h->e.cstride, h->pe + k0, k1 - k0);
    }
}

int sinpe_add_held(const sinpe_array *x, const sinpe_array *rows, int path, int threads)
{
    const sinpe_path_ops *ops = sinpe_paths_get(path);
    if (!ops)
        return SINPE_E_PATH;
    if (threads < 1 || threads > SINPE_MAX_THREADS)
        return SINPE_E_THREADS;
    int st = held_check(x, rows);
    if (st != SINPE_OK)
        return st;
    int64_t n = values_of(rows), values = values_of(x);
    int size = sinpe_type_size(x->type);
    held_ctx h = { { x->type, 1, size, x->type == SINPE_F32, ops }, /* aligned: checked */
                   (char *)x->data, (const float *)rows->data, n, sinpe_ceil_div(n, HELD_SEGMENT) };
    int64_t from = sinpe_threads_openmp() ? HELD_OPENMP_VALUES
                                          : SINPE_KEPT_SHARE * SINPE_MIN_THREAD_WORK;
    int64_t items = values / n * h.per_block;
    sinpe_parallel_for(items, sinpe_ceil_div(from / 2, HELD_SEGMENT), values < from ? 1 : threads,
                       held_task, &h);
    return SINPE_OK;
}
