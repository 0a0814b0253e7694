/* Jobs: every rule in one place (sinpe.h: sinpe_job_prepare, sinpe_job_check), memory
 * included, and the options.  Whatever the entry point (tables, adds, presets, rotary,
 * maps, frequency vectors), a job passes here before anything is allocated or written. */
#include "engine/engine.h"

#include <math.h>
#include <stdlib.h>
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

/* C-order strides of an array of its shape and type (saturated: the check refuses such
 * sizes). */
static void c_order(sinpe_array *a)
{
    int64_t stride = sinpe_type_size(a->type);
    for (int k = a->ndim - 1; k >= 0; k--) {
        int64_t n = a->shape[k] > 1 ? a->shape[k] : 1;
        a->strides[k] = stride;
        stride = stride > SINPE_MAX_SPAN / n ? SINPE_MAX_SPAN : stride * n;
    }
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
    c_order(&j->dst);
    j->cols = j->dst.ndim ? shape[j->dst.ndim - 1] : 0;
    j->rows = j->dst.ndim >= 2 ? shape[j->dst.ndim - 2] : 0;
    j->base = base;
}

int sinpe_check_base(double base)
{
    return isfinite(base) && base > 0.0 ? SINPE_OK : SINPE_E_BASE;
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

/* ---- the destination ------------------------------------------------------------------- */

static int check_dst(const sinpe_array *x, int want_type)
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
static int check_axes(const sinpe_array *x)
{
    for (int k = 0; k < x->ndim; k++)
        if (x->shape[k] < 0)
            return SINPE_E_ROWS;
    return SINPE_OK;
}

/* Bytes of an array of `n` axes of `shape` and `w`-byte elements, or -1 past SINPE_MAX_SPAN
 * (the last axis first: one row must be addressable even in an empty array). */
static int64_t bytes_of(int n, const int64_t *shape, int64_t w)
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

/* ---- tables and adds ---------------------------------------------------------------------- */

int sinpe_ncomp(const sinpe_job *j)
{
    if (j->pos.mode == SINPE_POS_GRID)
        return 2;
    return j->preset && j->preset->ncomp > 1 ? j->preset->ncomp : 1;
}

static int64_t table_cols(const sinpe_job *j)
{
    if (j->preset)
        return j->preset->ncol;
    return j->kind == SINPE_JOB_ADD ? j->dst.shape[j->dst.ndim - 1] : j->cols;
}

/* The row axes of the positions array (its last axis holds 2 components). */
static int pos_row_axes(const sinpe_job *j)
{
    return j->pos.at.ndim - (sinpe_ncomp(j) > 1);
}

/* The rules of a preset table's description, given its columns. */
static int check_preset(const sinpe_job *j)
{
    const sinpe_preset *sp = j->preset;
    int64_t T = sp->nang, d = sp->ncol;
    if (T < 0 || d < 0 || (d > 0 && (T < 1 || !sp->col)) || (T > 0 && (!sp->freq) == (!sp->freq64)))
        return SINPE_E_PRESET;
    if (sp->ncomp < 1 || sp->ncomp > 2 || (sp->ncomp == 2 && j->pos.mode == SINPE_POS_OFFSET)
        || (sp->ncomp == 1 && j->pos.mode == SINPE_POS_GRID))
        return SINPE_E_PRESET;
    for (int64_t t = 0; sp->comp && t < T; t++)
        if (sp->comp[t] < 0 || sp->comp[t] >= sp->ncomp)
            return SINPE_E_PRESET;
    for (int64_t k = 0; k < d; k++)
        if (sp->col[k] < 0 || sp->col[k] / 4 >= T)
            return SINPE_E_PRESET;
    /* torch's tensor may leave out only a leading zero row (fairseq2's pad row) */
    if (sp->trow_shift != 0
        && !(sp->trow_shift == -1 && j->pos.mode == SINPE_POS_ARRAY && sp->zero_row == 0))
        return SINPE_E_PRESET;
    if (sp->ncomp == 2 && j->pos.mode == SINPE_POS_ARRAY
        && (j->pos.at.ndim < 1 || j->pos.at.shape[j->pos.at.ndim - 1] != 2))
        return SINPE_E_PRESET;
    return SINPE_OK;
}

/* A TABLE's own shape (the destination may add one leading axis of length 1). */
static int table_shape(const sinpe_job *j, int *nd, int64_t *shape)
{
    int64_t d = table_cols(j);
    if (j->pos.mode == SINPE_POS_ARRAY) {
        int pn = pos_row_axes(j);
        if (pn < 0)
            return SINPE_E_PRESET;
        if (pn + 1 > SINPE_MAX_DIMS)
            return SINPE_E_DIMS;
        memcpy(shape, j->pos.at.shape, (size_t)pn * sizeof(int64_t));
        shape[pn] = d;
        *nd = pn + 1;
        return SINPE_OK;
    }
    int64_t rows = j->rows;
    if (j->pos.mode == SINPE_POS_GRID) {
        if (j->pos.grid_h < 0 || j->pos.grid_w < 0)
            return SINPE_E_ROWS;
        if (j->pos.grid_lead < 0)
            return SINPE_E_ROWS;
        if (j->pos.grid_w && j->pos.grid_h > (INT64_MAX - j->pos.grid_lead) / j->pos.grid_w)
            return SINPE_E_SIZE;
        rows = j->pos.grid_lead + j->pos.grid_h * j->pos.grid_w;
    }
    shape[0] = rows;
    shape[1] = d;
    *nd = 2;
    return SINPE_OK;
}

int sinpe_job_rows(const sinpe_job *j, int64_t *rows)
{
    const sinpe_array *x = &j->dst;
    if (j->pos.mode == SINPE_POS_OFFSET)
        *rows = j->kind == SINPE_JOB_ADD ? x->shape[x->ndim - 2] : j->rows;
    else
        *rows = sinpe_elements(x->ndim - 1, x->shape);
    return SINPE_OK;
}

/* By offset, the rows of the table torch evaluates in one call (table_rows, or offset + rows
 * when not given); -1 when its elements, rows * pairs, would pass int64: such rows are their
 * own tensor (plan: torch_tensor).  Not by offset, or with own_tensor, the rows themselves. */
int64_t sinpe_job_torch_rows(const sinpe_job *j, int64_t rows, int64_t pairs)
{
    if (j->pos.mode != SINPE_POS_OFFSET || j->own_tensor)
        return rows;
    int64_t whole = j->table_rows ? j->table_rows
                    : j->offset <= INT64_MAX - rows ? j->offset + rows : -1;
    return whole >= 0 && whole <= INT64_MAX / (pairs > 0 ? pairs : 1) ? whole : -1;
}

/* Strides (bytes) of the positions broadcast to the destination's row axes; -1 when their
 * shapes do not broadcast to exactly those axes. */
int sinpe_broadcast_positions(const sinpe_job *j, int64_t *strides)
{
    int n = j->dst.ndim - 1, pn = pos_row_axes(j);
    if (pn > n)
        return -1;
    for (int i = 0; i < n; i++) {
        int k = i - (n - pn);
        int64_t want = j->dst.shape[i];
        if (k < 0)
            strides[i] = 0;
        else if (j->pos.at.shape[k] == want)
            strides[i] = want == 1 ? 0 : j->pos.at.strides[k];
        else if (j->pos.at.shape[k] == 1)
            strides[i] = 0;
        else
            return -1;
    }
    return 0;
}

/* The positions' extent in bytes, over the destination's row axes (and the components). */
static int positions_extent(const sinpe_job *j, int64_t *lo, int64_t *hi)
{
    int n = j->dst.ndim - 1;
    int64_t shape[SINPE_MAX_DIMS + 1], strides[SINPE_MAX_DIMS + 1];
    memcpy(shape, j->dst.shape, (size_t)n * sizeof(int64_t));
    if (sinpe_broadcast_positions(j, strides) < 0)
        return SINPE_E_BROADCAST;
    if (sinpe_ncomp(j) > 1) {
        shape[n] = 2;
        strides[n] = j->pos.at.strides[j->pos.at.ndim - 1];
        n++;
    }
    return sinpe_extent(n, shape, strides, sinpe_type_size(j->pos.at.type), lo, hi);
}

static int check_positions(const sinpe_job *j)
{
    const sinpe_array *p = &j->pos.at;
    if ((int)p->type < 0 || p->type >= SINPE_TYPE_COUNT)
        return SINPE_E_TYPE;
    if (p->ndim < 0 || p->ndim > SINPE_MAX_DIMS)
        return SINPE_E_DIMS;
    int64_t strides[SINPE_MAX_DIMS];
    if (sinpe_broadcast_positions(j, strides) < 0)
        return SINPE_E_BROADCAST;
    int64_t lo, hi;
    int st = positions_extent(j, &lo, &hi);
    if (st != SINPE_OK)
        return st;
    if (lo != hi && !p->data)
        return SINPE_E_NULL;
    return SINPE_OK;
}

static int check_offset(const sinpe_job *j, int64_t len, int64_t d)
{
    if (j->offset < 0)
        return SINPE_E_OFFSET;
    if (len > 0 && j->offset > INT64_MAX - (len - 1))
        return SINPE_E_LASTPOS;
    if (j->table_rows < 0 || (!j->table_grow && j->table_rows != 0
                              && j->table_rows - len < j->offset))
        return SINPE_E_TABLE;
    if (d > 0 && j->table_rows > INT64_MAX / d) /* d = 0: an empty table, no size to pass */
        return SINPE_E_SIZE;
    return SINPE_OK;
}

int sinpe_table_check(const sinpe_job *j)
{
    const sinpe_array *x = &j->dst;
    int add = j->kind == SINPE_JOB_ADD;
    if ((int)j->pos.mode < 0 || j->pos.mode > SINPE_POS_GRID || (add && j->pos.mode == SINPE_POS_GRID))
        return SINPE_E_FUNC;
    if (j->pos.mode == SINPE_POS_ARRAY && j->offset != 0)
        return SINPE_E_BOTH;
    if (add && x->ndim < 2)
        return SINPE_E_DIMS;
    if (!add && x->ndim < 1)
        return SINPE_E_SHAPE;
    int64_t d = table_cols(j), w = sinpe_type_size(x->type);
    if (j->preset) {
        int st = check_preset(j);
        if (st != SINPE_OK)
            return st;
    } else if (j->pos.mode == SINPE_POS_GRID) {
        return SINPE_E_PRESET; /* a grid's positions have two components */
    } else if (d < 2 || d % 2 != 0) {
        return SINPE_E_DMODEL;
    }
    if ((!add && j->pos.mode == SINPE_POS_OFFSET && j->rows < 0) || check_axes(x) != SINPE_OK)
        return SINPE_E_ROWS;
    if (!j->preset && sinpe_check_base(j->base) != SINPE_OK)
        return SINPE_E_BASE;
    if (d > SINPE_MAX_SPAN / w)
        return SINPE_E_SIZE;
    if (!add) { /* the destination has the table's shape, or one more leading axis of 1 */
        int nd;
        int64_t shape[SINPE_MAX_DIMS];
        int st = table_shape(j, &nd, shape);
        if (st != SINPE_OK)
            return st;
        if (bytes_of(nd, shape, w) < 0)
            return SINPE_E_SIZE;
        int lead = j->lead_one && x->ndim == nd + 1 && x->shape[0] == 1;
        if (x->ndim != nd + lead || memcmp(x->shape + lead, shape, (size_t)nd * sizeof(int64_t)))
            return SINPE_E_SHAPE;
    }
    if (bytes_of(x->ndim, x->shape, w) < 0)
        return SINPE_E_SIZE;
    if (j->pos.mode == SINPE_POS_OFFSET) {
        int64_t len;
        sinpe_job_rows(j, &len);
        int st = check_offset(j, len, d);
        if (st != SINPE_OK)
            return st;
    } else if (j->pos.mode == SINPE_POS_ARRAY) {
        int st = check_positions(j);
        if (st != SINPE_OK)
            return st;
    }
    return SINPE_OK;
}

/* 1 when the positions' bytes and the destination's bytes intersect. */
int sinpe_positions_alias(const sinpe_job *j)
{
    if (j->pos.mode != SINPE_POS_ARRAY || !j->pos.at.data || !j->dst.data)
        return 0;
    const sinpe_array *x = &j->dst;
    int64_t dlo, dhi, plo, phi;
    if (sinpe_extent(x->ndim, x->shape, x->strides, sinpe_type_size(x->type), &dlo, &dhi)
            != SINPE_OK
        || positions_extent(j, &plo, &phi) != SINPE_OK)
        return 1;
    if (dlo == dhi || plo == phi)
        return 0;
    uintptr_t d0 = (uintptr_t)x->data, p0 = (uintptr_t)j->pos.at.data;
    uintptr_t da = d0 + (uintptr_t)dlo, db = d0 + (uintptr_t)dhi;
    uintptr_t pa = p0 + (uintptr_t)plo, pb = p0 + (uintptr_t)phi;
    return pa < db && da < pb;
}

/* ---- kept rows ------------------------------------------------------------------------------ */

/* Kept rows (sinpe.h, sinpe_job.kept): a table job's own rows, in range, apart from dst;
 * read by positions only where the backend's results do not couple. */
int sinpe_kept_span(const sinpe_kept *k, int64_t *lo, int64_t *hi)
{
    *lo = k->fill_first;
    *hi = k->fill_end;
    if (k->ready_end <= k->ready_first)
        return SINPE_OK; /* no rows filled before */
    if (k->ready_first < k->first || k->ready_end - k->first > k->rows)
        return SINPE_E_KEPT;
    if (k->fill_end > k->fill_first
        && (k->fill_first > k->ready_end || k->ready_first > k->fill_end))
        return SINPE_E_KEPT; /* two intervals apart */
    if (k->fill_end <= k->fill_first || k->ready_first < *lo)
        *lo = k->ready_first;
    if (k->fill_end <= k->fill_first || k->ready_end > *hi)
        *hi = k->ready_end;
    return SINPE_OK;
}

static int check_kept(const sinpe_job *j, const sinpe_backend_ops *be)
{
    const sinpe_kept *k = &j->kept;
    if (!k->data)
        return SINPE_OK;
    int64_t d = j->dst.ndim ? j->dst.shape[j->dst.ndim - 1] : 0, len = 0;
    if ((j->kind != SINPE_JOB_TABLE && j->kind != SINPE_JOB_ADD) || j->preset || j->own_tensor
        || j->pos.mode == SINPE_POS_GRID || k->rows < 0 || k->stride < d
        || k->first < 0 || k->first > INT64_MAX - k->rows
        || k->fill_first < k->first || k->fill_end < k->fill_first
        || k->fill_end > k->first + k->rows
        || (k->rows > 0 && k->stride > SINPE_MAX_SPAN / 4 / k->rows))
        return SINPE_E_KEPT;
    int64_t rlo, rhi;
    if (sinpe_kept_span(k, &rlo, &rhi) != SINPE_OK)
        return SINPE_E_KEPT;
    if (j->pos.mode == SINPE_POS_ARRAY && !be->independent)
        return SINPE_E_KEPT;
    /* the fill computes positions fill_first .. fill_end - 1 as rows of torch's tensor from
     * row 0: their elements must index in int64, and rows past that (their own tensor) are
     * not a cache's */
    int64_t pairs = d / 2 > 0 ? d / 2 : 1;
    if (k->fill_end > INT64_MAX / pairs)
        return SINPE_E_KEPT;
    if (j->pos.mode == SINPE_POS_OFFSET) {
        sinpe_job_rows(j, &len);
        if (len > 0 && (j->offset < rlo || j->offset - rlo > rhi - rlo - len))
            return SINPE_E_KEPT;
        if (sinpe_job_torch_rows(j, len, pairs) < 0)
            return SINPE_E_KEPT;
    }
    int64_t lo, hi;
    const sinpe_array *x = &j->dst;
    if (k->rows == 0 || j->fresh
        || sinpe_extent(x->ndim, x->shape, x->strides, sinpe_type_size(x->type), &lo, &hi) != SINPE_OK
        || lo == hi)
        return SINPE_OK;
    uintptr_t x0 = (uintptr_t)x->data + (uintptr_t)lo, x1 = (uintptr_t)x->data + (uintptr_t)hi;
    uintptr_t k0 = (uintptr_t)k->data, k1 = k0 + (uintptr_t)(k->rows * k->stride * 4);
    return k0 < x1 && x0 < k1 ? SINPE_E_KEPT : SINPE_OK;
}

/* ---- maps --------------------------------------------------------------------------------- */

int sinpe_map_check(const sinpe_job *j)
{
    const sinpe_array *s = &j->src, *x = &j->dst;
    if ((int)j->func < 0 || j->func >= SINPE_FN_COUNT)
        return SINPE_E_FUNC;
    if (x->type != SINPE_F32 || s->type != SINPE_F32)
        return SINPE_E_TYPE;
    if (s->ndim != x->ndim || memcmp(s->shape, x->shape, (size_t)x->ndim * sizeof(int64_t)))
        return SINPE_E_SHAPE;
    if (bytes_of(x->ndim, x->shape, 4) < 0)
        return SINPE_E_SIZE;
    if (sinpe_elements(s->ndim, s->shape) == 0) /* nothing to map: an empty array's strides say nothing */
        return SINPE_OK;
    sinpe_array c = *s;
    c_order(&c);
    for (int k = 0; k < s->ndim; k++) /* both in C order */
        if (s->shape[k] > 1 && (s->strides[k] != c.strides[k] || x->strides[k] != c.strides[k]))
            return SINPE_E_SHAPE;
    return s->data ? SINPE_OK : SINPE_E_NULL;
}

/* ---- the check -------------------------------------------------------------------------- */

/* The kind's own rules (engine/kinds.c: the table of job kinds). */
static int check_kind(const sinpe_job *j)
{
    const sinpe_kind *k = sinpe_kind_of(j->kind);
    return k ? k->check(j) : SINPE_E_FUNC;
}

/* Every rule of a complete job, once; the options' backend context and operations come
 * back to the plan (ctx, be: NULL when not wanted). */
int sinpe_job_checked(const sinpe_job *j, const sinpe_opts *o, int fresh, sinpe_bctx *ctx,
                      const sinpe_backend_ops **be)
{
    if (!j || !o)
        return SINPE_E_NULL;
    int st = check_dst(&j->dst, j->want_type);
    const sinpe_kind *k = sinpe_kind_of(j->kind);
    if (st == SINPE_OK && !(k && k->table))
        st = check_axes(&j->dst); /* tables check d_model first */
    if (st == SINPE_OK)
        st = check_kind(j);
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
    return st == SINPE_OK ? check_kept(j, ops) : st;
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

/* The scratch of a job's plan: its geometry, on the stack, without allocating. */
static int64_t scratch_bytes(const sinpe_job *j, const sinpe_opts *o)
{
    const sinpe_kind *k = sinpe_kind_of(j->kind);
    if (!k || !k->table)
        return 0;
    static const sinpe_plan zero;
    sinpe_plan p = zero;
    p.j = *j;
    p.o = *o;
    p.path = sinpe_paths_entry(0);
    p.npos = sinpe_positions_alias(j) ? sinpe_elements(j->dst.ndim - 1, j->dst.shape) : 0;
    sinpe_table_geometry(&p);
    p.nslots = (int)sinpe_table_threads(&p);
    return sinpe_plan_scratch_bytes(&p);
}

void sinpe_job_need(const sinpe_job *j, const sinpe_opts *o, sinpe_need *need)
{
    memset(need, 0, sizeof *need);
    need->physical = sinpe_physical_memory();
    if (j && o)
        sinpe_admit(j->fresh ? j->dst.ndim : -1, j->dst.shape, j->dst.type,
                    scratch_bytes(j, o) + reserve_bytes(&j->kept), need);
}

/* A fresh destination's shape, the result's, per kind (adds and rotations work in place). */
int sinpe_table_fresh(sinpe_job *j)
{
    int st = check_dst(&j->dst, j->want_type);
    if (st != SINPE_OK)
        return st;
    if ((int)j->pos.mode < 0 || j->pos.mode > SINPE_POS_GRID)
        return SINPE_E_FUNC;
    return table_shape(j, &j->dst.ndim, j->dst.shape);
}

int sinpe_map_fresh(sinpe_job *j)
{
    sinpe_array *x = &j->dst;
    x->ndim = j->src.ndim < 0 || j->src.ndim > SINPE_MAX_DIMS ? 0 : j->src.ndim;
    memcpy(x->shape, j->src.shape, (size_t)x->ndim * sizeof(int64_t));
    return SINPE_OK;
}

int sinpe_freq_fresh(sinpe_job *j)
{
    j->dst.ndim = 1;
    j->dst.shape[0] = j->rows;
    return SINPE_OK;
}

static int fresh_shape(sinpe_job *j)
{
    const sinpe_kind *k = sinpe_kind_of(j->kind);
    int st = k && k->fresh ? k->fresh(j) : SINPE_E_FUNC;
    if (st != SINPE_OK)
        return st;
    c_order(&j->dst);
    j->dst.readonly = 0;
    return SINPE_OK;
}

int sinpe_admit(int ndim, const int64_t *shape, sinpe_type t, int64_t scratch, sinpe_need *need)
{
    sinpe_need n = { 0, scratch > 0 ? scratch : 0, sinpe_physical_memory() };
    int64_t w = sinpe_type_size(t);
    int64_t b = ndim < 0 ? 0 /* no array */
                : ndim <= SINPE_MAX_DIMS && w > 0 ? bytes_of(ndim, shape, w) : -1;
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

/* A job made complete: a fresh destination's shape and strides, a growing table_rows. */
static int complete(sinpe_job *j)
{
    if (j->fresh) {
        int st = fresh_shape(j);
        if (st != SINPE_OK)
            return st;
    }
    if ((j->kind == SINPE_JOB_TABLE || j->kind == SINPE_JOB_ADD) && j->table_grow
        && j->pos.mode == SINPE_POS_OFFSET && j->table_rows >= 0) {
        int64_t len = 0;
        if (j->dst.ndim >= 2 || j->kind == SINPE_JOB_TABLE)
            sinpe_job_rows(j, &len);
        if (j->table_rows - len < j->offset) /* the rows' own table holds them */
            j->table_rows = 0;
    }
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
    };
    return status >= 0 && status < SINPE_STATUS_COUNT ? text[status] : "unknown sinpe status";
}
