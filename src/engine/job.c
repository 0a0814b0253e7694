/* Jobs: the one check every job passes (sinpe.h: sinpe_job_prepare, sinpe_job_check), memory
 * included, and the options.  The rules common to every kind are here; each kind's own are
 * reached through its row of engine/kinds.c (engine/table.c, rope.c, map.c, freqs.c).
 * Whatever the entry point (tables, adds, presets, rotary, maps, frequency vectors), a job
 * passes here before anything is allocated or written. */
#include "engine/engine.h"

#include <string.h>

#include "engine/layout.h"
#include "platform/memory.h"
#include "platform/threads.h"

#if SINPE_THREADS_MAX != SINPE_MAX_THREADS
#error "platform/threads.h and sinpe.h disagree on the thread limit"
#endif

void sinpe_opts_init(sinpe_opts *o)
{
    memset(o, 0, sizeof *o);
    o->path = sinpe_paths_best();
    o->threads = 1;
    o->sleef.lanes = 4;
    o->sleef.torch_threads = 1;
}

void sinpe_job_init(sinpe_job *j, void *data, int ndim, const int64_t *shape, double base)
{
    memset(j, 0, sizeof *j);
    j->kind = SINPE_JOB_TABLE;
    j->want_type = -1;
    j->dst.data = data;
    j->dst.type = SINPE_F32;
    j->dst.ndim = ndim < 0 ? 0 : ndim > SINPE_MAX_DIMS ? SINPE_MAX_DIMS : ndim;
    memcpy(j->dst.shape, shape, (size_t)j->dst.ndim * sizeof(int64_t));
    sinpe_c_order(&j->dst);
    j->cols = j->dst.ndim ? shape[j->dst.ndim - 1] : 0;
    j->rows = j->dst.ndim >= 2 ? shape[j->dst.ndim - 2] : 0;
    j->base = base;
}

/* ---- options ------------------------------------------------------------------------------ */

int sinpe_opts_check(const sinpe_opts *o, sinpe_bctx *ctx, const sinpe_backend_ops **out)
{
    if (!o)
        return SINPE_E_NULL;
    if (o->threads < 1 || o->threads > SINPE_MAX_THREADS)
        return SINPE_E_THREADS;
    if (o->sleef.torch_threads < 1 || o->sleef.torch_threads > SINPE_MAX_TORCH_THREADS)
        return SINPE_E_TORCH_THREADS;
    const sinpe_backend_ops *be = sinpe_backends_get(o->backend);
    if (!be || o->pow_lanes < 0 || !be->ready())
        return SINPE_E_BACKEND;
    /* the built-in backend runs on the asked path; the others store through the best */
    int builtin = o->backend == SINPE_BACKEND_BUILTIN;
    const sinpe_path_ops *path = sinpe_paths_get(builtin ? o->path : sinpe_paths_best());
    if (!path)
        return SINPE_E_PATH;
    sinpe_bctx c;
    memset(&c, 0, sizeof c);
    c.path = path;
    c.trig = o->sleef.trig;
    c.lanes = o->sleef.lanes;
    c.torch_threads = o->sleef.torch_threads;
    c.pow_lanes = o->pow_lanes;
    if (be->check(&c) != 0)
        return SINPE_E_BACKEND;
    if (ctx)
        *ctx = c;
    if (out)
        *out = be;
    return SINPE_OK;
}

/* ---- the check -------------------------------------------------------------------------- */

/* Kept rows (sinpe.h: sinpe_job.kept) only where the kind takes them, by its rules. */
static int check_kept(const sinpe_job *j, const sinpe_kind *k, const sinpe_backend_ops *be)
{
    if (k->kept)
        return k->kept(j, be);
    return j->kept.data ? SINPE_E_KEPT : SINPE_OK;
}

/* Every rule of a complete job, once: the destination's, the kind's own (engine/kinds.c: the
 * table of job kinds), the layout's, the options' and the kept rows'; the options' backend
 * context and operations come back to the plan (ctx, be: NULL when not wanted). */
int sinpe_job_checked(const sinpe_job *j, const sinpe_opts *o, int fresh, sinpe_bctx *ctx,
                      const sinpe_backend_ops **be)
{
    if (!j || !o)
        return SINPE_E_NULL;
    const sinpe_kind *k = sinpe_kind_of(j->kind);
    int st = sinpe_check_dst(&j->dst, j->want_type);
    if (st == SINPE_OK && !(k && k->own_axes))
        st = sinpe_check_axes(&j->dst);
    if (st == SINPE_OK)
        st = k ? k->check(j) : SINPE_E_FUNC;
    if (st != SINPE_OK)
        return st;
    const sinpe_array *x = &j->dst;
    int64_t w = sinpe_type_size(x->type);
    if (!fresh) {
        st = sinpe_overlap_check(x->ndim, x->shape, x->strides, w);
        if (st != SINPE_OK)
            return st;
        if (sinpe_elements(x->ndim, x->shape) > 0 && !x->data)
            return SINPE_E_NULL;
    }
    const sinpe_backend_ops *ops;
    st = sinpe_opts_check(o, ctx, &ops);
    if (be)
        *be = ops;
    return st == SINPE_OK ? check_kept(j, k, ops) : st;
}

int sinpe_job_check(const sinpe_job *j, const sinpe_opts *o)
{
    return sinpe_job_checked(j, o, 0, NULL, NULL);
}

/* ---- memory ------------------------------------------------------------------------------ */

/* The bytes of a kept buffer the caller allocates after prepare (sinpe.h: kept.reserve). */
static int64_t reserve_bytes(const sinpe_kept *k)
{
    if (k->data || k->reserve <= 0)
        return 0;
    return k->reserve < SINPE_MAX_SPAN ? k->reserve : SINPE_MAX_SPAN;
}

/* The scratch of a job's plan: laid out on the stack by its kind, without allocating (0
 * for kinds without scratch). */
static int64_t scratch_bytes(const sinpe_job *j, const sinpe_opts *o)
{
    const sinpe_kind *k = sinpe_kind_of(j->kind);
    if (!k || !k->scratch)
        return 0;
    static const sinpe_plan zero;
    sinpe_plan p = zero;
    p.j = *j;
    p.o = *o;
    p.path = sinpe_paths_entry(0);
    k->layout(&p);
    return sinpe_plan_bytes(&p, k);
}

void sinpe_job_need(const sinpe_job *j, const sinpe_opts *o, sinpe_need *need)
{
    memset(need, 0, sizeof *need);
    need->physical = sinpe_physical_memory();
    if (j && o)
        sinpe_admit(j->fresh ? j->dst.ndim : -1, j->dst.shape, j->dst.type,
                    scratch_bytes(j, o) + reserve_bytes(&j->kept), need);
}

/* A fresh destination's shape, the result's, by its kind (adds and rotations work in
 * place), in C order. */
static int fresh_shape(sinpe_job *j, const sinpe_kind *k)
{
    int st = k && k->fresh ? k->fresh(j) : SINPE_E_FUNC;
    if (st != SINPE_OK)
        return st;
    sinpe_c_order(&j->dst);
    j->dst.readonly = 0;
    return SINPE_OK;
}

int sinpe_admit(int ndim, const int64_t *shape, sinpe_type t, int64_t scratch, sinpe_need *need)
{
    sinpe_need n = { 0, scratch > 0 ? scratch : 0, sinpe_physical_memory() };
    int64_t w = sinpe_type_size(t);
    int64_t b = ndim < 0 ? 0 /* no array */
                : ndim <= SINPE_MAX_DIMS && w > 0 ? sinpe_bytes_of(ndim, shape, w) : -1;
    for (int k = 0; b >= 0 && k < ndim; k++)
        if (shape[k] < 0)
            b = -1;
    n.fresh = b > 0 ? b : 0;
    if (need)
        *need = n;
    if (b < 0)
        return SINPE_E_SIZE;
    return n.physical > 0 && n.fresh + n.scratch > n.physical ? SINPE_E_MEMORY : SINPE_OK;
}

/* A job made complete: a fresh destination's shape and strides, what its kind completes (a
 * growing table_rows). */
static int complete(sinpe_job *j)
{
    const sinpe_kind *k = sinpe_kind_of(j->kind);
    if (j->fresh) {
        int st = fresh_shape(j, k);
        if (st != SINPE_OK)
            return st;
    }
    if (k && k->complete)
        k->complete(j);
    return SINPE_OK;
}

int sinpe_job_complete_check(sinpe_job *j, const sinpe_opts *o, sinpe_bctx *ctx,
                             const sinpe_backend_ops **be)
{
    if (!j || !o)
        return SINPE_E_NULL;
    int st = complete(j);
    return st == SINPE_OK ? sinpe_job_checked(j, o, j->fresh, ctx, be) : st;
}

int sinpe_job_prepare(sinpe_job *j, const sinpe_opts *o)
{
    int st = sinpe_job_complete_check(j, o, NULL, NULL);
    if (st != SINPE_OK)
        return st;
    const sinpe_array *x = &j->dst;
    return sinpe_admit(j->fresh ? x->ndim : -1, x->shape, x->type,
                       scratch_bytes(j, o) + reserve_bytes(&j->kept), NULL);
}

const char *sinpe_strerror(int status)
{
    static const char *text[SINPE_STATUS_COUNT] = {
        "ok",
        "d_model must be an even integer >= 2",
        "the number of rows must be >= 0",
        "base must be finite and > 0",
        "offset must be >= 0",
        "the last position (offset + rows - 1) does not fit in int64",
        "more bytes than memory can address",
        "out of memory for scratch space",
        "backend unknown or not loaded",
        "NULL pointer where memory is needed",
        "the backend library could not be loaded",
        "code path unknown or not supported on this build or CPU",
        "element type not supported there",
        "too few or too many axes",
        "two elements of the destination share memory",
        "could not decide whether the destination's elements overlap",
        "unknown function or kind",
        "threads must be between 1 and 256",
        "the table (table_rows) must hold rows offset .. offset + rows - 1",
        "inconsistent preset table description",
        "more memory than this machine has",
        "the destination's shape is not the result's",
        "the destination is read-only",
        "positions and a nonzero offset exclude each other",
        "positions do not broadcast to the destination's rows",
        "the destination's element type is not the one asked for",
        "torch_threads must be between 1 and 4096",
        "the rotated columns must be even, >= 2 and at most the last axis",
        "the sequence or batch axis is not an axis before the last",
        "cos and sin must be float32 tables of shape (tables, seq, rot)",
        "the kept rows do not suit the job",
        "the OpenMP runtime is not loaded in this process or is not one sinpe can run on",
        "the rotation's form is unknown, or not one for float64",
    };
    return status >= 0 && status < SINPE_STATUS_COUNT ? text[status] : "unknown sinpe status";
}
