/* The one status-to-exception mapper: each core status becomes the documented exception,
 * its message naming the parameter and its value (binding/binding.h). */
#include "binding/binding.h"

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

void raise_status(int st, const call *c)
{
    const sinpe_job *j = &c->job;
    const sinpe_array *x = &j->dst;
    int nd = x->ndim;
    long long d = j->kind == SINPE_JOB_ADD || j->kind == SINPE_JOB_ROPE
                      ? (nd ? (long long)x->shape[nd - 1] : 0) : (long long)j->cols;
    long long rows = 0;
    if (j->kind == SINPE_JOB_ADD && nd >= 2)
        rows = (long long)x->shape[nd - 2];
    else
        rows = (long long)j->rows;
    const char *tname = (int)x->type >= 0 && x->type < SINPE_TYPE_COUNT ? TYPE_NAMES[x->type] : "?";
    switch (st) {
    case SINPE_E_DMODEL:
        PyErr_Format(PyExc_ValueError, "%s must be an even integer >= 2, got %lld%s", c->cols_name,
                     d, j->kind == SINPE_JOB_ADD ? " (x.shape[-1])" : "");
        break;
    case SINPE_E_ROWS:
        PyErr_Format(PyExc_ValueError, "%s must be >= 0, got %lld", c->rows_name, rows);
        break;
    case SINPE_E_BASE:
        if (c->base_obj)
            PyErr_Format(PyExc_ValueError, "%s must be finite and > 0, got %R", c->base_name,
                         c->base_obj);
        else
            PyErr_Format(PyExc_ValueError, "%s must be finite and > 0, got %g", c->base_name,
                         j->base);
        break;
    case SINPE_E_OFFSET:
        PyErr_Format(PyExc_ValueError, "offset must be >= 0, got %lld", (long long)j->offset);
        break;
    case SINPE_E_LASTPOS:
        PyErr_Format(PyExc_OverflowError, "offset=%lld is too large for %lld rows: the last "
                     "position, offset + %lld, does not fit in int64", (long long)j->offset, rows,
                     rows - 1);
        break;
    case SINPE_E_SIZE: {
        PyObject *shape = shape_tuple(nd, x->shape);
        if (!shape)
            break;
        int64_t w = sinpe_type_size(x->type) > 0 ? sinpe_type_size(x->type) : 1;
        if (d > ((int64_t)1 << 60) / w)
            PyErr_Format(PyExc_OverflowError, "%s=%lld is too large: one row of that many %s "
                         "values is larger than memory can address", c->cols_name, d, tname);
        else if (j->kind != SINPE_JOB_TABLE || j->pos.mode == SINPE_POS_ARRAY)
            PyErr_Format(PyExc_OverflowError, "%s (shape %R, %s) or its positions reach more "
                         "bytes than memory can address", c->what, shape, tname);
        else
            PyErr_Format(PyExc_OverflowError, "a table of %lld rows of %lld %s values is larger "
                         "than memory can address", rows, d, tname);
        Py_DECREF(shape);
        break;
    }
    case SINPE_E_MEMORY:
        raise_memory(c);
        break;
    case SINPE_E_OVERLAP:
        PyErr_Format(PyExc_ValueError, "%s has elements that share memory (a zero or overlapping "
                     "stride, as from np.broadcast_to or as_strided): writing it in place would "
                     "be ill-defined; pass a copy (np.ascontiguousarray)", c->what);
        break;
    case SINPE_E_UNDECIDED:
        PyErr_Format(PyExc_ValueError, "%s has strides for which sinpe could not decide within "
                     "its search budget whether elements share memory; pass a copy "
                     "(np.ascontiguousarray)", c->what);
        break;
    case SINPE_E_BACKEND:
        PyErr_Format(PyExc_RuntimeError, "backend %s is not available",
                     sinpe_backend_name(c->opts.backend) ? sinpe_backend_name(c->opts.backend) : "?");
        break;
    case SINPE_E_PATH:
        PyErr_SetString(PyExc_RuntimeError, "the selected kernel path is not available here");
        break;
    case SINPE_E_NOMEM:
        PyErr_SetString(PyExc_MemoryError, "out of memory for sinpe's scratch space");
        break;
    case SINPE_E_THREADS:
        PyErr_Format(PyExc_ValueError, "threads must be between 1 and 256, got %lld", c->threads);
        break;
    case SINPE_E_TORCH_THREADS:
        PyErr_Format(PyExc_ValueError, "torch_threads must be between 1 and 4096, got %lld",
                     c->torch_threads);
        break;
    case SINPE_E_TABLE:
        if (j->table_rows < 0)
            PyErr_Format(PyExc_ValueError, "max_len must be >= 0, got %lld", (long long)j->table_rows);
        else
            PyErr_Format(PyExc_ValueError, "max_len=%lld is smaller than offset + seq_len = "
                         "%lld + %lld", (long long)j->table_rows, (long long)j->offset, rows);
        break;
    case SINPE_E_NULL:
        PyErr_Format(PyExc_ValueError, "%s: the buffer has no memory (a NULL pointer)", c->what);
        break;
    case SINPE_E_TYPE:
        PyErr_Format(PyExc_TypeError, "%s must have dtype float32, float16, bfloat16 or float64, "
                     "got %s", c->what, tname);
        break;
    case SINPE_E_DTYPE:
        PyErr_Format(PyExc_TypeError, "%s has dtype %s but dtype=%R asks for %s", c->what, tname,
                     c->dtype_obj ? c->dtype_obj : Py_None,
                     j->want_type >= 0 && j->want_type < SINPE_TYPE_COUNT ? TYPE_NAMES[j->want_type] : "?");
        break;
    case SINPE_E_READONLY:
        PyErr_Format(PyExc_ValueError, "%s is read-only", c->what);
        break;
    case SINPE_E_SHAPE:
        raise_shape(c);
        break;
    case SINPE_E_DIMS: {
        PyObject *shape = shape_tuple(nd, x->shape);
        if (shape && j->kind == SINPE_JOB_ADD)
            PyErr_Format(PyExc_ValueError, "x must have at least 2 dimensions (..., seq_len, "
                         "d_model), got shape %R", shape);
        else if (shape)
            PyErr_Format(PyExc_ValueError, "%s has too many or too few dimensions (shape %R)",
                         c->what, shape);
        Py_XDECREF(shape);
        break;
    }
    case SINPE_E_BOTH:
        PyErr_SetString(PyExc_ValueError, "offset and positions exclude each other");
        break;
    case SINPE_E_BROADCAST: {
        PyObject *p = shape_tuple(j->pos.at.ndim, j->pos.at.shape);
        PyObject *xs = shape_tuple(nd - 1, x->shape);
        if (p && xs)
            PyErr_Format(PyExc_ValueError, "positions of shape %R do not broadcast to "
                         "x.shape[:-1] = %R", p, xs);
        Py_XDECREF(p);
        Py_XDECREF(xs);
        break;
    }
    case SINPE_E_ROT:
        PyErr_Format(PyExc_ValueError, "the rotated part (%lld columns) must be even, >= 2 and "
                     "at most x.shape[-1] = %lld", (long long)j->rope.cos.shape[2], d);
        break;
    case SINPE_E_AXIS:
        PyErr_Format(PyExc_ValueError, "seq_dim=%d is not an axis of x before the last (x has "
                     "%d dimensions)", j->rope.seq_axis, nd);
        break;
    case SINPE_E_TABLES:
        PyErr_SetString(PyExc_ValueError, "cos and sin must be float32 tables of shape "
                        "(tables, x.shape[seq_dim], rot), one table or one per batch element");
        break;
    case SINPE_E_KEPT: /* the package's cache handed rows that do not suit: a bug, not input */
        PyErr_Format(PyExc_RuntimeError, "sinpe: %s (the cache's; sinpe.clear_cache() and "
                     "report it)", sinpe_strerror(st));
        break;
    default:
        PyErr_Format(PyExc_ValueError, "sinpe: %s", sinpe_strerror(st));
        break;
    }
}

