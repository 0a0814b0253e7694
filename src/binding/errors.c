/* The one status-to-exception mapper: each core status becomes the documented exception,
 * its message naming the parameter and its value (binding/binding.h). */
#include "binding/binding.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define TYPE_NAMES SINPE_TYPE_NAMES

/* ---- errors: one mapper --------------------------------------------------------------- */

static void raise_shape(const call *c)
{
    const sinpe_job *j = &c->job;
    const sinpe_array *x = &j->dst;
    PyObject *got = shape_tuple(x->ndim, x->shape);
    PyObject *want = NULL;
    if (j->kind == SINPE_JOB_TABLE && j->pos.mode == SINPE_POS_ARRAY) {
        int pn = j->pos.at.ndim - (j->preset && j->preset->ncomp > 1);
        int64_t s[SINPE_MAX_DIMS + 1];
        memcpy(s, j->pos.at.shape, (size_t)(pn > 0 ? pn : 0) * sizeof(int64_t));
        s[pn > 0 ? pn : 0] = j->preset ? j->preset->ncol : j->cols;
        want = shape_tuple(pn > 0 ? pn + 1 : 1, s);
        if (got && want)
            PyErr_Format(PyExc_ValueError, "%s has shape %R; expected %R", c->what, got, want);
    } else if (j->kind == SINPE_JOB_TABLE) {
        long long rows = j->pos.mode == SINPE_POS_GRID
                             ? (long long)(j->pos.grid_lead + j->pos.grid_h * j->pos.grid_w)
                             : (long long)j->rows;
        long long cols = j->preset ? (long long)j->preset->ncol : (long long)j->cols;
        if (got && j->lead_one)
            PyErr_Format(PyExc_ValueError, "%s has shape %R; expected (%lld, %lld) or (1, %lld, %lld)",
                         c->what, got, rows, cols, rows, cols);
        else if (got)
            PyErr_Format(PyExc_ValueError, "%s has shape %R; expected (%lld, %lld)", c->what, got,
                         rows, cols);
    } else if (got) {
        PyErr_Format(PyExc_ValueError, "%s of shape %R does not match its source", c->what, got);
    }
    Py_XDECREF(got);
    Py_XDECREF(want);
}

void raise_memory_of(const char *noun, const sinpe_array *x, const sinpe_need *n)
{
    PyObject *shape = shape_tuple(x->ndim, x->shape);
    if (!shape)
        return;
    double gib = 1073741824.0;
    char figures[160];
    snprintf(figures, sizeof figures, "%.1f GiB (%.1f GiB of it scratch), more than this "
             "machine's %.1f GiB of memory", (double)(n->fresh + n->scratch) / gib,
             (double)n->scratch / gib, (double)n->physical / gib);
    PyObject *msg = PyUnicode_FromFormat("%s of shape %R (%s) needs %s", noun, shape,
                                         TYPE_NAMES[x->type], figures);
    if (msg)
        PyErr_SetObject(PyExc_MemoryError, msg);
    Py_XDECREF(msg);
    Py_DECREF(shape);
}

static void raise_memory(const call *c)
{
    sinpe_need n;
    sinpe_job_need(&c->job, &c->opts, &n);
    raise_memory_of(c->noun, &c->job.dst, &n);
}

/* What the messages of one call say about its job, computed once. */
typedef struct {
    int st;
    const sinpe_array *x;
    int nd;
    long long d, rows;
    const char *tname;
} facts;

static void on_dmodel(const call *c, const facts *f)
{
    PyErr_Format(PyExc_ValueError, "%s must be an even integer >= 2, got %lld%s", c->cols_name,
                 f->d, c->job.kind == SINPE_JOB_ADD ? " (x.shape[-1])" : "");
}

static void on_rows(const call *c, const facts *f)
{
    PyErr_Format(PyExc_ValueError, "%s must be >= 0, got %lld", c->rows_name, f->rows);
}

static void on_base(const call *c, const facts *f)
{
    (void)f;
    const sinpe_freq *q = c->job.kind == SINPE_JOB_FREQS ? c->job.freq : NULL;
    if (q && isfinite(q->base64) && q->base64 > 0.0) /* float32 made it 0 or inf */
        PyErr_Format(PyExc_ValueError, "%s=%R is outside float32's range (its float32 is %s; "
                     "the frequencies are computed in float32, as torch's pow computes them)",
                     c->base_name, c->base_obj, q->base == 0.0f ? "0" : "inf");
    else if (c->base_obj)
        PyErr_Format(PyExc_ValueError, "%s must be finite and > 0, got %R", c->base_name,
                     c->base_obj);
    else
        PyErr_Format(PyExc_ValueError, "%s must be finite and > 0, got %g", c->base_name,
                     c->job.base);
}

static void on_offset(const call *c, const facts *f)
{
    (void)f;
    PyErr_Format(PyExc_ValueError, "offset must be >= 0, got %lld", (long long)c->job.offset);
}

static void on_lastpos(const call *c, const facts *f)
{
    PyErr_Format(PyExc_OverflowError, "offset=%lld is too large for %lld rows: the last "
                 "position, offset + %lld, does not fit in int64", (long long)c->job.offset, f->rows,
                 f->rows - 1);
}

static void on_size(const call *c, const facts *f)
{
    PyObject *shape = shape_tuple(f->nd, f->x->shape);
    if (!shape)
        return;
    int64_t w = sinpe_type_size(f->x->type) > 0 ? sinpe_type_size(f->x->type) : 1;
    if (f->d > ((int64_t)1 << 60) / w)
        PyErr_Format(PyExc_OverflowError, "%s=%lld is too large: one row of that many %s "
                     "values is larger than memory can address", c->cols_name, f->d, f->tname);
    else if (c->job.kind != SINPE_JOB_TABLE || c->job.pos.mode == SINPE_POS_ARRAY)
        PyErr_Format(PyExc_OverflowError, "%s (shape %R, %s) or its positions reach more "
                     "bytes than memory can address", c->what, shape, f->tname);
    else
        PyErr_Format(PyExc_OverflowError, "a table of %lld rows of %lld %s values is larger "
                     "than memory can address", f->rows, f->d, f->tname);
    Py_DECREF(shape);
}

static void on_memory(const call *c, const facts *f)
{
    (void)f;
    raise_memory(c);
}

static void on_overlap(const call *c, const facts *f)
{
    (void)f;
    PyErr_Format(PyExc_ValueError, "%s has elements that share memory (a zero or overlapping "
                 "stride, as from np.broadcast_to or as_strided): writing it in place would "
                 "be ill-defined; pass a copy (np.ascontiguousarray)", c->what);
}

static void on_undecided(const call *c, const facts *f)
{
    (void)f;
    PyErr_Format(PyExc_ValueError, "%s has strides for which sinpe could not decide within "
                 "its search budget whether elements share memory; pass a copy "
                 "(np.ascontiguousarray)", c->what);
}

static void on_backend(const call *c, const facts *f)
{
    (void)f;
    PyErr_Format(PyExc_RuntimeError, "backend %s is not available",
                 sinpe_backend_name(c->opts.backend) ? sinpe_backend_name(c->opts.backend) : "?");
}

static void on_path(const call *c, const facts *f)
{
    (void)c;
    (void)f;
    PyErr_SetString(PyExc_RuntimeError, "the selected kernel path is not available here");
}

static void on_nomem(const call *c, const facts *f)
{
    (void)c;
    (void)f;
    PyErr_SetString(PyExc_MemoryError, "out of memory for sinpe's scratch space");
}

static void on_threads(const call *c, const facts *f)
{
    (void)f;
    PyErr_Format(PyExc_ValueError, "threads must be between 1 and 256, got %lld", c->threads);
}

static void on_torch_threads(const call *c, const facts *f)
{
    (void)f;
    PyErr_Format(PyExc_ValueError, "torch_threads must be between 1 and 4096, got %lld",
                 c->torch_threads);
}

static void on_table(const call *c, const facts *f)
{
    if (c->job.table_rows < 0)
        PyErr_Format(PyExc_ValueError, "max_len must be >= 0, got %lld",
                     (long long)c->job.table_rows);
    else
        PyErr_Format(PyExc_ValueError, "max_len=%lld is smaller than offset + seq_len = "
                     "%lld + %lld", (long long)c->job.table_rows, (long long)c->job.offset,
                     f->rows);
}

static void on_null(const call *c, const facts *f)
{
    (void)f;
    PyErr_Format(PyExc_ValueError, "%s: the buffer has no memory (a NULL pointer)", c->what);
}

static void on_type(const call *c, const facts *f)
{
    PyErr_Format(PyExc_TypeError, "%s must have dtype float32, float16, bfloat16 or float64, "
                 "got %s", c->what, f->tname);
}

static void on_dtype(const call *c, const facts *f)
{
    PyErr_Format(PyExc_TypeError, "%s has dtype %s but dtype=%R asks for %s", c->what, f->tname,
                 c->dtype_obj ? c->dtype_obj : Py_None,
                 c->job.want_type >= 0 && c->job.want_type < SINPE_TYPE_COUNT ? TYPE_NAMES[c->job.want_type] : "?");
}

static void on_readonly(const call *c, const facts *f)
{
    (void)f;
    PyErr_Format(PyExc_ValueError, "%s is read-only", c->what);
}

static void on_shape(const call *c, const facts *f)
{
    (void)f;
    raise_shape(c);
}

static void on_dims(const call *c, const facts *f)
{
    PyObject *shape = shape_tuple(f->nd, f->x->shape);
    if (shape && c->job.kind == SINPE_JOB_ADD)
        PyErr_Format(PyExc_ValueError, "x must have at least 2 dimensions (..., seq_len, "
                     "d_model), got shape %R", shape);
    else if (shape)
        PyErr_Format(PyExc_ValueError, "%s has too many or too few dimensions (shape %R)",
                     c->what, shape);
    Py_XDECREF(shape);
}

static void on_both(const call *c, const facts *f)
{
    (void)c;
    (void)f;
    PyErr_SetString(PyExc_ValueError, "offset and positions exclude each other");
}

static void on_broadcast(const call *c, const facts *f)
{
    PyObject *p = shape_tuple(c->job.pos.at.ndim, c->job.pos.at.shape);
    PyObject *xs = shape_tuple(f->nd - 1, f->x->shape);
    if (p && xs)
        PyErr_Format(PyExc_ValueError, "positions of shape %R do not broadcast to "
                     "x.shape[:-1] = %R", p, xs);
    Py_XDECREF(p);
    Py_XDECREF(xs);
}

static void on_rot(const call *c, const facts *f)
{
    PyErr_Format(PyExc_ValueError, "the rotated part (%lld columns) must be even, >= 2 and "
                 "at most x.shape[-1] = %lld", (long long)c->job.rope.cos.shape[2], f->d);
}

static void on_axis(const call *c, const facts *f)
{
    PyErr_Format(PyExc_ValueError, "seq_dim=%d is not an axis of x before the last (x has "
                 "%d dimensions)", c->job.rope.seq_axis, f->nd);
}

static void on_tables(const call *c, const facts *f)
{
    (void)c;
    (void)f;
    PyErr_SetString(PyExc_ValueError, "cos and sin must be float32 tables of shape "
                    "(tables, x.shape[seq_dim], rot), one table or one per batch element");
}

static void on_kept(const call *c, const facts *f)
{
    (void)c;
    PyErr_Format(PyExc_RuntimeError, "sinpe: %s (the cache's; sinpe.clear_cache() and "
                 "report it)", sinpe_strerror(f->st));
}

static void on_other(const call *c, const facts *f)
{
    (void)c;
    PyErr_Format(PyExc_ValueError, "sinpe: %s", sinpe_strerror(f->st));
}

/* The status-to-exception map: one raiser per status code (other codes: the core's text). */
typedef void (*raiser)(const call *c, const facts *f);
static const raiser RAISERS[SINPE_STATUS_COUNT] = {
    [SINPE_E_DMODEL] = on_dmodel,
    [SINPE_E_ROWS] = on_rows,
    [SINPE_E_BASE] = on_base,
    [SINPE_E_OFFSET] = on_offset,
    [SINPE_E_LASTPOS] = on_lastpos,
    [SINPE_E_SIZE] = on_size,
    [SINPE_E_MEMORY] = on_memory,
    [SINPE_E_OVERLAP] = on_overlap,
    [SINPE_E_UNDECIDED] = on_undecided,
    [SINPE_E_BACKEND] = on_backend,
    [SINPE_E_PATH] = on_path,
    [SINPE_E_NOMEM] = on_nomem,
    [SINPE_E_THREADS] = on_threads,
    [SINPE_E_TORCH_THREADS] = on_torch_threads,
    [SINPE_E_TABLE] = on_table,
    [SINPE_E_NULL] = on_null,
    [SINPE_E_TYPE] = on_type,
    [SINPE_E_DTYPE] = on_dtype,
    [SINPE_E_READONLY] = on_readonly,
    [SINPE_E_SHAPE] = on_shape,
    [SINPE_E_DIMS] = on_dims,
    [SINPE_E_BOTH] = on_both,
    [SINPE_E_BROADCAST] = on_broadcast,
    [SINPE_E_ROT] = on_rot,
    [SINPE_E_AXIS] = on_axis,
    [SINPE_E_TABLES] = on_tables,
    [SINPE_E_KEPT] = on_kept, /* the cache handed rows that do not suit: a bug, not input */
};

/* A rotation of two arrays refused for its second (the core's check passes the job without
 * it): the message names the second array, and its facts are its own. */
static int second_refused(const call *c)
{
    if (c->job.kind != SINPE_JOB_ROPE || !c->job.rope.second || !c->what2)
        return 0;
    sinpe_job one = c->job;
    one.rope.second = 0;
    return sinpe_job_check(&one, &c->opts) == SINPE_OK;
}

void raise_status(int st, const call *c)
{
    if (second_refused(c)) {
        call named = *c;
        named.what = c->what2;
        named.job.dst = c->job.rope.dst2;
        named.job.rope.second = 0;
        named.what2 = NULL;
        raise_status(st, &named);
        return;
    }
    const sinpe_job *j = &c->job;
    facts f;
    f.st = st;
    f.x = &j->dst;
    f.nd = f.x->ndim;
    f.d = j->kind == SINPE_JOB_ADD || j->kind == SINPE_JOB_ROPE
              ? (f.nd ? (long long)f.x->shape[f.nd - 1] : 0) : (long long)j->cols;
    f.rows = j->kind == SINPE_JOB_ADD && f.nd >= 2 ? (long long)f.x->shape[f.nd - 2]
                                                   : (long long)j->rows;
    f.tname = (int)f.x->type >= 0 && f.x->type < SINPE_TYPE_COUNT ? TYPE_NAMES[f.x->type] : "?";
    raiser r = st > 0 && st < SINPE_STATUS_COUNT && RAISERS[st] ? RAISERS[st] : on_other;
    r(c, &f);
}

/* names: None, or the caller's names of a rope call's six arrays (x, cos, sin, src, x2, src2) */
int rope_names(PyObject *names, const char *nm[6])
{
    static const char *const own[6] = { "x", "cos", "sin", "src", "x2", "src2" };
    int given = PyTuple_Check(names) && PyTuple_GET_SIZE(names) == 6;
    for (int i = 0; i < 6; i++) {
        PyObject *n = given ? PyTuple_GET_ITEM(names, i) : NULL;
        if ((n && !PyUnicode_Check(n)) || (!given && names != Py_None))
            return PyErr_SetString(PyExc_TypeError, "rope: names must be None or 6 str"), -1;
        if (!(nm[i] = n ? PyUnicode_AsUTF8(n) : own[i]))
            return -1;
    }
    return 0;
}
