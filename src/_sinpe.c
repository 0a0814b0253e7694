/* _sinpe: the CPython / NumPy binding of the sinpe core.
 *
 * Thin: argument parsing and validation with messages that name the bad
 * value, buffer checks, GIL release around the core, status -> exception
 * mapping.  All numerics live in the pure-C core (sinpe_core.c). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <stdint.h>
#include <string.h>
#ifndef _WIN32
#include <unistd.h>
#endif

#include "sinpe_core.h"

static const char *BACKEND_NAMES[SINPE_BACKEND_COUNT] = { "builtin", "mkl" };

/* Per-module state (multi-phase init: each interpreter, each module object,
 * has its own defaults).  The oneMKL library itself is process-wide. */
typedef struct {
    sinpe_backend backend;
    sinpe_kernel kernel; /* the best path at import (CPU probe) */
    int threads;         /* set by the package at import */
} module_state;

static module_state *state_of(PyObject *module)
{
    return (module_state *)PyModule_GetState(module);
}

/* Why the oneMKL backend is unavailable; process-wide like the library. */
static char g_mkl_reason[512] = "oneMKL was not looked for";

/* Calls are run in pieces of about this many floats, with the GIL released
 * for each; between pieces pending signals are handled, so Ctrl-C stops a
 * huge table or add_pe within milliseconds (2M floats: about 20 ms on the
 * scalar path, 2 ms on the AVX2 path). */
#define SINPE_PIECE_FLOATS ((int64_t)1 << 21)

/* ---- argument helpers -------------------------------------------------- */

static int get_int64(PyObject *o, const char *name, int64_t *v)
{
    if (PyBool_Check(o) || !PyIndex_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be an integer, got %R (%s)", name, o,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    PyObject *i = PyNumber_Index(o);
    if (!i)
        return -1;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(i, &overflow);
    Py_DECREF(i);
    if (overflow) {
        PyErr_Format(PyExc_OverflowError, "%s=%R does not fit in a 64-bit integer", name, o);
        return -1;
    }
    if (x == -1 && PyErr_Occurred())
        return -1;
    *v = (int64_t)x;
    return 0;
}

static int get_base(PyObject *o, double *base)
{
    if (o == NULL) {
        *base = 10000.0;
        return 0;
    }
    if (PyBool_Check(o) || PyComplex_Check(o) || !(PyFloat_Check(o) || PyLong_Check(o)
                                                  || Py_TYPE(o)->tp_as_number != NULL)) {
        PyErr_Format(PyExc_TypeError, "base must be a real number, got %R (%s)", o,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    double b = PyFloat_AsDouble(o);
    if (b == -1.0 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "base must be a real number, got %R (%s)", o,
                         Py_TYPE(o)->tp_name);
        }
        return -1;
    }
    if (!isfinite(b) || !(b > 0.0)) {
        PyErr_Format(PyExc_ValueError, "base must be finite and > 0, got %R", o);
        return -1;
    }
    *base = b;
    return 0;
}

static int get_backend(module_state *ms, PyObject *o, sinpe_backend *be)
{
    if (o == NULL || o == Py_None) {
        *be = ms->backend;
    } else {
        if (!PyUnicode_Check(o)) {
            PyErr_Format(PyExc_TypeError, "backend must be a string or None, got %R", o);
            return -1;
        }
        int found = -1;
        for (int i = 0; i < SINPE_BACKEND_COUNT; i++)
            if (PyUnicode_CompareWithASCIIString(o, BACKEND_NAMES[i]) == 0)
                found = i;
        if (found < 0) {
            PyErr_Format(PyExc_ValueError, "unknown backend %R: choose 'builtin' or 'mkl'", o);
            return -1;
        }
        *be = (sinpe_backend)found;
    }
    if (*be == SINPE_BACKEND_MKL && !sinpe_mkl_loaded()) {
        PyErr_Format(PyExc_RuntimeError, "backend 'mkl' is not available: %s", g_mkl_reason);
        return -1;
    }
    return 0;
}

static int get_threads(module_state *ms, PyObject *o, int *threads)
{
    if (o == NULL || o == Py_None) {
        *threads = ms->threads;
        return 0;
    }
    int64_t t;
    if (get_int64(o, "threads", &t) < 0)
        return -1;
    if (t < 1 || t > 256) {
        PyErr_Format(PyExc_ValueError, "threads must be between 1 and 256, got %lld",
                     (long long)t);
        return -1;
    }
    *threads = (int)t;
    return 0;
}

static int get_opts(module_state *ms, PyObject *o_be, PyObject *o_threads, sinpe_opts *opts)
{
    if (get_backend(ms, o_be, &opts->backend) < 0
        || get_threads(ms, o_threads, &opts->threads) < 0)
        return -1;
    opts->kernel = ms->kernel;
    return 0;
}

/* Maps a core status to an exception (the core validated the same values
 * the binding already checked, so this is mostly a safety net). */
static PyObject *raise_status(int st)
{
    PyObject *type = PyExc_ValueError;
    if (st == SINPE_E_SIZE)
        type = PyExc_OverflowError;
    else if (st == SINPE_E_NOMEM)
        type = PyExc_MemoryError;
    else if (st == SINPE_E_BACKEND || st == SINPE_E_LOAD || st == SINPE_E_KERNEL)
        type = PyExc_RuntimeError;
    PyErr_SetString(type, sinpe_strerror(st));
    return NULL;
}

static int check_sizes(int64_t rows, const char *rows_name, int64_t d_model, double base)
{
    int st = sinpe_check_args(rows, d_model, base);
    if (st == SINPE_E_DMODEL)
        PyErr_Format(PyExc_ValueError, "d_model must be an even integer >= 2, got %lld",
                     (long long)d_model);
    else if (st == SINPE_E_MAXLEN)
        PyErr_Format(PyExc_ValueError, "%s must be >= 0, got %lld", rows_name, (long long)rows);
    else if (st == SINPE_E_SIZE)
        PyErr_Format(PyExc_OverflowError,
                     "a table of %lld x %lld float32 values is larger than memory can address",
                     (long long)rows, (long long)d_model);
    else if (st != SINPE_OK)
        raise_status(st);
    return st == SINPE_OK ? 0 : -1;
}

/* A table larger than the machine's physical memory is refused up front
 * (Linux would overcommit the allocation and kill the process later). */
static int check_memory(int64_t rows, int64_t d_model)
{
#if !defined(_WIN32) && defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psize > 0) {
        double mem = (double)pages * (double)psize;
        double need = (double)rows * (double)d_model * 4.0;
        if (need > mem) {
            PyErr_Format(PyExc_MemoryError,
                         "a table of %lld x %lld float32 values needs %.1f GiB, more than "
                         "this machine's %.1f GiB of memory",
                         (long long)rows, (long long)d_model, need / 1073741824.0,
                         mem / 1073741824.0);
            return -1;
        }
    }
#else
    (void)rows;
    (void)d_model;
#endif
    return 0;
}

static const char *format_name(const char *fmt)
{
    if (!fmt)
        return "uint8 (no format)";
    const char *f = fmt;
    if (*f == '<' || *f == '=' || *f == '@' || *f == '>' || *f == '!')
        f++;
    static const struct { const char *c, *name; } names[] = {
        { "f", "float32" }, { "d", "float64" }, { "e", "float16" }, { "b", "int8" },
        { "B", "uint8" }, { "h", "int16" }, { "H", "uint16" }, { "i", "int32" },
        { "I", "uint32" }, { "l", "int64" }, { "L", "uint64" }, { "q", "int64" },
        { "Q", "uint64" }, { "?", "bool" }, { "g", "float128" },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(f, names[i].c) == 0)
            return names[i].name;
    return fmt;
}

static int is_native_float32(const Py_buffer *v)
{
    if (v->itemsize != 4 || !v->format)
        return 0;
    const char *f = v->format;
#if PY_BIG_ENDIAN
    if (*f == '@' || *f == '=' || *f == '>' || *f == '!')
#else
    if (*f == '@' || *f == '=' || *f == '<')
#endif
        f++;
    return strcmp(f, "f") == 0;
}

/* Gets a writable float32 buffer of `what` with strides; on error, raises. */
static int get_f32_buffer(PyObject *o, const char *what, Py_buffer *v)
{
    if (PyObject_GetBuffer(o, v, PyBUF_RECORDS_RO) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "%s must be a writable float32 array (buffer protocol), got %s", what,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    if (!is_native_float32(v)) {
        PyErr_Format(PyExc_TypeError, "%s must have dtype float32, got %s", what,
                     format_name(v->format));
        goto fail;
    }
    if (v->readonly) {
        PyErr_Format(PyExc_ValueError, "%s is read-only", what);
        goto fail;
    }
    return 0;
fail:
    PyBuffer_Release(v);
    return -1;
}

static PyObject *shape_str(const Py_buffer *v)
{
    PyObject *t = PyTuple_New(v->ndim);
    if (!t)
        return NULL;
    for (int i = 0; i < v->ndim; i++)
        PyTuple_SET_ITEM(t, i, PyLong_FromSsize_t(v->shape[i]));
    return t;
}

/* ---- positional_encoding ---------------------------------------------- */

PyDoc_STRVAR(pe_doc,
"positional_encoding($module, /, max_len=None, d_model=None, base=10000.0, *, positions=None,\n"
"                    out=None, backend=None, threads=None)\n"
"--\n\n"
"Sinusoidal positional-encoding table, float32, shape (max_len, d_model).\n\n"
"pe[pos, 2i] = sin(pos * div[i]) and pe[pos, 2i+1] = cos(pos * div[i]) with\n"
"div[i] = exp(2i * -log(base) / d_model), computed step by step as the\n"
"reference PyTorch module does (bit for bit with torch on the 'mkl' backend).\n\n"
"positions: instead of max_len, an array of positions of any shape (integers,\n"
"     or reals rounded to float32 as torch's .float() does; negative and\n"
"     fractional positions work); the result has shape positions.shape + (d_model,).\n"
"out: a writable C-contiguous float32 buffer (NumPy array, memoryview, the\n"
"     NumPy view of a torch CPU tensor) of shape (max_len, d_model) or\n"
"     (1, max_len, d_model), or positions.shape + (d_model,), filled and returned.\n"
"backend: 'builtin' (correctly rounded) or 'mkl' (oneMKL VML, torch's bits);\n"
"     None uses sinpe.get_backend().\n"
"threads: worker threads (None: sinpe.get_threads()); the bits do not depend on it.\n");

/* positions -> a new C-contiguous float32 array (integers and reals rounded
 * to nearest float32, as torch's .float()); NULL with an exception on error. */
static PyArrayObject *positions_array(PyObject *o)
{
    PyArrayObject *a = (PyArrayObject *)PyArray_FROM_O(o);
    if (!a)
        return NULL;
    int t = PyArray_TYPE(a);
    if (!(PyTypeNum_ISINTEGER(t) || PyTypeNum_ISFLOAT(t)) || PyTypeNum_ISBOOL(t)) {
        PyErr_Format(PyExc_TypeError, "positions must be integers or real numbers, got dtype %R",
                     (PyObject *)PyArray_DESCR(a));
        Py_DECREF(a);
        return NULL;
    }
    PyArrayObject *f = (PyArrayObject *)PyArray_FROM_OTF((PyObject *)a, NPY_FLOAT32,
                                                        NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED
                                                            | NPY_ARRAY_FORCECAST);
    Py_DECREF(a);
    return f;
}

/* Checks that out (a buffer view) has shape `shape` (nd dims), or (1, ...)
 * of it when allow_lead1; raises ValueError naming both shapes. */
static int check_out_shape(const Py_buffer *v, int nd, const npy_intp *shape, int allow_lead1)
{
    int ok = v->ndim == nd;
    for (int i = 0; ok && i < nd; i++)
        ok = v->shape[i] == shape[i];
    if (!ok && allow_lead1 && v->ndim == nd + 1 && v->shape[0] == 1) {
        ok = 1;
        for (int i = 0; ok && i < nd; i++)
            ok = v->shape[i + 1] == shape[i];
    }
    if (ok)
        return 0;
    PyObject *got = shape_str(v), *want = PyTuple_New(nd);
    if (got && want) {
        for (int i = 0; i < nd; i++)
            PyTuple_SET_ITEM(want, i, PyLong_FromSsize_t(shape[i]));
        if (allow_lead1)
            PyErr_Format(PyExc_ValueError, "out has shape %R; expected %R or (1, %lld, %lld)", got,
                         want, (long long)shape[0], (long long)shape[1]);
        else
            PyErr_Format(PyExc_ValueError, "out has shape %R; expected %R", got, want);
    }
    Py_XDECREF(got);
    Py_XDECREF(want);
    return -1;
}

static PyObject *py_positional_encoding(PyObject *self, PyObject *args, PyObject *kw)
{
    module_state *ms = state_of(self);
    static char *kwlist[] = { "max_len", "d_model", "base", "positions", "out", "backend",
                              "threads", NULL };
    PyObject *o_len = Py_None, *o_d = Py_None, *o_base = NULL, *o_pos = Py_None, *o_out = Py_None;
    PyObject *o_be = NULL, *o_thr = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOO$OOOO:positional_encoding", kwlist, &o_len,
                                     &o_d, &o_base, &o_pos, &o_out, &o_be, &o_thr))
        return NULL;
    if (o_d == Py_None) {
        PyErr_SetString(PyExc_TypeError, "positional_encoding() needs d_model");
        return NULL;
    }
    if ((o_len == Py_None) == (o_pos == Py_None)) {
        PyErr_SetString(PyExc_TypeError,
                        "positional_encoding() needs exactly one of max_len and positions");
        return NULL;
    }
    int64_t max_len = 0, d_model;
    double base;
    sinpe_opts opts;
    if ((o_len != Py_None && get_int64(o_len, "max_len", &max_len) < 0)
        || get_int64(o_d, "d_model", &d_model) < 0 || get_base(o_base, &base) < 0)
        return NULL;
    PyArrayObject *pos = NULL;
    PyObject *result = NULL;
    Py_buffer view;
    int have_view = 0;
    npy_intp shape[NPY_MAXDIMS + 1];
    int nd = 2;
    if (o_pos != Py_None) {
        if (check_sizes(0, "max_len", d_model, base) < 0) /* d_model before positions */
            return NULL;
        pos = positions_array(o_pos);
        if (!pos)
            return NULL;
        nd = PyArray_NDIM(pos) + 1;
        if (nd > NPY_MAXDIMS) {
            PyErr_SetString(PyExc_ValueError, "positions has too many dimensions");
            goto fail;
        }
        for (int i = 0; i < nd - 1; i++) /* (a 0-d array has no dims pointer) */
            shape[i] = PyArray_DIMS(pos)[i];
        shape[nd - 1] = (npy_intp)d_model;
        max_len = (int64_t)PyArray_SIZE(pos);
    } else {
        shape[0] = (npy_intp)max_len;
        shape[1] = (npy_intp)d_model;
    }
    if (check_sizes(max_len, "max_len", d_model, base) < 0
        || get_opts(ms, o_be, o_thr, &opts) < 0)
        goto fail;
    float *data;
    if (o_out == Py_None) {
        if (check_memory(max_len, d_model) < 0)
            goto fail;
        result = PyArray_SimpleNew(nd, shape, NPY_FLOAT32);
        if (!result)
            goto fail;
        data = (float *)PyArray_DATA((PyArrayObject *)result);
    } else {
        if (get_f32_buffer(o_out, "out", &view) < 0)
            goto fail;
        have_view = 1;
        if (check_out_shape(&view, nd, shape, pos == NULL) < 0)
            goto fail;
        if (!PyBuffer_IsContiguous(&view, 'C')) {
            PyErr_SetString(PyExc_ValueError, "out must be C-contiguous");
            goto fail;
        }
        data = (float *)view.buf;
        Py_INCREF(o_out);
        result = o_out;
    }
    const float *p = pos ? (const float *)PyArray_DATA(pos) : NULL;
    int64_t piece = SINPE_PIECE_FLOATS / d_model > 0 ? SINPE_PIECE_FLOATS / d_model : 1;
    for (int64_t r0 = 0; r0 < max_len; r0 += piece) {
        int64_t nr = max_len - r0 < piece ? max_len - r0 : piece;
        int st;
        Py_BEGIN_ALLOW_THREADS
        st = sinpe_table_at(data + r0 * d_model, p ? p + r0 : NULL, r0, nr, d_model, base, &opts);
        Py_END_ALLOW_THREADS
        if (st != SINPE_OK) {
            raise_status(st);
            goto fail;
        }
        if (r0 + nr < max_len && PyErr_CheckSignals() < 0)
            goto fail; /* interrupted: out, if given, holds rows 0 .. r0+nr-1 */
    }
    if (have_view)
        PyBuffer_Release(&view);
    Py_XDECREF(pos);
    return result;
fail:
    if (have_view)
        PyBuffer_Release(&view);
    Py_XDECREF(pos);
    Py_XDECREF(result);
    return NULL;
}

/* ---- add_pe ------------------------------------------------------------ */

/* Collapses the leading axes of x (all but the last two) into one batch axis
 * with a single stride; fails when they do not form one. */
static int collapse_batch(const Py_buffer *v, int64_t *nbatch, Py_ssize_t *bstride)
{
    int64_t n = 1;
    Py_ssize_t stride = 0;
    int have = 0;
    for (int i = v->ndim - 3; i >= 0; i--) {
        if (v->shape[i] == 1)
            continue;
        if (!have) {
            stride = v->strides[i];
            have = 1;
        } else if (v->strides[i] != stride * (Py_ssize_t)n) {
            return -1;
        }
        n *= v->shape[i];
    }
    for (int i = 0; i < v->ndim - 2; i++)
        if (v->shape[i] == 0)
            n = 0;
    *nbatch = n;
    *bstride = stride;
    return 0;
}

static Py_ssize_t abs_ss(Py_ssize_t a) { return a < 0 ? -a : a; }

/* Rows (len of them, d floats each, stride rs) in nbatch blocks (stride bs)
 * are disjoint when, ordering the two strides by size, each is at least the
 * extent of everything inside it.  Strides in bytes. */
static int rows_disjoint(int64_t nbatch, int64_t len, int64_t d, Py_ssize_t bs, Py_ssize_t rs)
{
    Py_ssize_t row = (Py_ssize_t)d * 4;
    Py_ssize_t a = abs_ss(rs), b = abs_ss(bs);
    int64_t na = len, nb = nbatch;
    if (na <= 1) { a = 0; }
    if (nb <= 1) { b = 0; }
    if (a > b) { Py_ssize_t t = a; a = b; b = t; int64_t u = na; na = nb; nb = u; }
    if (a == 0 && b == 0)
        return 1;
    if (a == 0) /* only one axis has more than one element */
        return b >= row;
    return a >= row && b >= (Py_ssize_t)(na - 1) * a + row;
}

PyDoc_STRVAR(add_doc,
"add_pe($module, x, /, base=10000.0, *, offset=0, backend=None, threads=None)\n"
"--\n\n"
"Add the positional encoding to x in place and return x.\n\n"
"x: a writable float32 array of shape (seq_len, d_model) or (..., seq_len,\n"
"   d_model) whose last axis is contiguous.  Rows offset .. offset+seq_len-1\n"
"   of the table are added to every batch element: x + pe[offset:offset+L],\n"
"   bit for bit as the reference forward in eval mode.  Rows are computed,\n"
"   so there is no max_len limit.\n");

static PyObject *py_add_pe(PyObject *self, PyObject *args, PyObject *kw)
{
    module_state *ms = state_of(self);
    static char *kwlist[] = { "", "base", "offset", "backend", "threads", NULL };
    PyObject *o_x, *o_base = NULL, *o_off = NULL, *o_be = NULL, *o_thr = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O$OOO:add_pe", kwlist, &o_x, &o_base, &o_off,
                                     &o_be, &o_thr))
        return NULL;
    double base;
    int64_t offset = 0;
    sinpe_opts opts;
    if (get_base(o_base, &base) < 0 || (o_off && get_int64(o_off, "offset", &offset) < 0))
        return NULL;
    if (offset < 0) {
        PyErr_Format(PyExc_ValueError, "offset must be >= 0, got %lld", (long long)offset);
        return NULL;
    }
    if (get_opts(ms, o_be, o_thr, &opts) < 0)
        return NULL;
    Py_buffer v;
    if (get_f32_buffer(o_x, "x", &v) < 0)
        return NULL;
    PyObject *err_shape = NULL;
    if (v.ndim < 2) {
        err_shape = shape_str(&v);
        if (err_shape)
            PyErr_Format(PyExc_ValueError,
                         "x must have at least 2 dimensions (..., seq_len, d_model), got shape %R",
                         err_shape);
        goto fail;
    }
    int64_t len = v.shape[v.ndim - 2], d = v.shape[v.ndim - 1];
    if (check_sizes(len, "seq_len", d, base) < 0)
        goto fail;
    if (offset > INT64_MAX - len) {
        PyErr_Format(PyExc_OverflowError, "offset + seq_len = %lld + %lld overflows int64",
                     (long long)offset, (long long)len);
        goto fail;
    }
    Py_ssize_t rs = v.strides[v.ndim - 2], cs = v.strides[v.ndim - 1], bs;
    int64_t nbatch;
    if (collapse_batch(&v, &nbatch, &bs) < 0 || (cs != 4 && d > 1) || rs % 4 || bs % 4) {
        PyErr_SetString(PyExc_ValueError,
                        "x has a layout add_pe cannot write in place: the last axis must be "
                        "contiguous and the leading axes must form one strided batch axis; "
                        "use np.ascontiguousarray(x) and assign the result back");
        goto fail;
    }
    if (!rows_disjoint(nbatch, len, d, bs, rs)) {
        PyErr_SetString(PyExc_ValueError, "x has overlapping rows (a stride-tricks view); "
                                          "adding in place would be ill-defined");
        goto fail;
    }
    int st = SINPE_OK, interrupted = 0;
    int64_t per_row = (nbatch > 0 ? nbatch : 1) * d;
    int64_t piece = SINPE_PIECE_FLOATS / per_row > 0 ? SINPE_PIECE_FLOATS / per_row : 1;
    for (int64_t r0 = 0; r0 < len && nbatch > 0 && st == SINPE_OK; r0 += piece) {
        int64_t nr = len - r0 < piece ? len - r0 : piece;
        float *x0 = (float *)((char *)v.buf + (ptrdiff_t)r0 * rs);
        Py_BEGIN_ALLOW_THREADS
        st = sinpe_add(x0, nbatch, nr, d, bs / 4, rs / 4, offset + r0, base, &opts);
        Py_END_ALLOW_THREADS
        if (st == SINPE_OK && r0 + nr < len && PyErr_CheckSignals() < 0) {
            interrupted = 1; /* rows 0 .. r0+nr-1 of every batch element are added */
            break;
        }
    }
    PyBuffer_Release(&v);
    if (interrupted)
        return NULL;
    if (st != SINPE_OK)
        return raise_status(st);
    Py_INCREF(o_x);
    return o_x;
fail:
    Py_XDECREF(err_shape);
    PyBuffer_Release(&v);
    return NULL;
}

/* ---- elementwise kernels, backends ----------------------------------- */

PyDoc_STRVAR(elementwise_doc,
"elementwise($module, func, x, /, *, backend=None)\n"
"--\n\n"
"func(x) elementwise for func in 'exp', 'sin', 'cos' and a float32 ndarray x,\n"
"as the chosen backend computes it.  Returns a new C-contiguous array.\n");

static PyObject *py_elementwise(PyObject *self, PyObject *args, PyObject *kw)
{
    module_state *ms = state_of(self);
    static char *kwlist[] = { "", "", "backend", NULL };
    const char *fname;
    PyObject *o_x, *o_be = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO|$O:elementwise", kwlist, &fname, &o_x, &o_be))
        return NULL;
    int func = !strcmp(fname, "exp") ? 0 : !strcmp(fname, "sin") ? 1 : !strcmp(fname, "cos") ? 2 : -1;
    if (func < 0) {
        PyErr_Format(PyExc_ValueError, "func must be 'exp', 'sin' or 'cos', got %R",
                     PyTuple_GET_ITEM(args, 0));
        return NULL;
    }
    sinpe_opts opts;
    if (get_opts(ms, o_be, NULL, &opts) < 0)
        return NULL;
    if (!PyArray_Check(o_x) || PyArray_TYPE((PyArrayObject *)o_x) != NPY_FLOAT32) {
        PyErr_Format(PyExc_TypeError, "x must be a float32 ndarray, got %s", Py_TYPE(o_x)->tp_name);
        return NULL;
    }
    PyArrayObject *in = (PyArrayObject *)PyArray_FROM_OTF(o_x, NPY_FLOAT32, NPY_ARRAY_IN_ARRAY);
    if (!in)
        return NULL;
    PyObject *out = PyArray_NewLikeArray(in, NPY_CORDER, NULL, 0);
    if (!out) {
        Py_DECREF(in);
        return NULL;
    }
    size_t n = (size_t)PyArray_SIZE(in);
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = sinpe_map(func, (const float *)PyArray_DATA(in),
                   (float *)PyArray_DATA((PyArrayObject *)out), n, &opts);
    Py_END_ALLOW_THREADS
    Py_DECREF(in);
    if (st != SINPE_OK) {
        Py_DECREF(out);
        return raise_status(st);
    }
    return out;
}

PyDoc_STRVAR(load_mkl_doc,
"load_mkl($module, path, /)\n"
"--\n\n"
"Load the oneMKL runtime library at path for the 'mkl' backend (once per\n"
"process).  Raises OSError with the reason on failure.\n");

static PyObject *py_load_mkl(PyObject *self, PyObject *arg)
{
    (void)self;
    PyObject *bytes;
    if (!PyUnicode_FSConverter(arg, &bytes))
        return NULL;
    char msg[512];
    int st;
    const char *path = PyBytes_AS_STRING(bytes);
    Py_BEGIN_ALLOW_THREADS
    st = sinpe_mkl_load(path, msg, sizeof msg);
    Py_END_ALLOW_THREADS
    Py_DECREF(bytes);
    if (st != SINPE_OK) {
        snprintf(g_mkl_reason, sizeof g_mkl_reason, "%s", msg);
        PyErr_Format(PyExc_OSError, "cannot load oneMKL: %s", msg);
        return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(set_unavailable_doc,
"_set_mkl_unavailable($module, reason, /)\n"
"--\n\n"
"Record why the 'mkl' backend is not available (shown in errors).\n");

static PyObject *py_set_unavailable(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *s = PyUnicode_AsUTF8(arg);
    if (!s)
        return NULL;
    snprintf(g_mkl_reason, sizeof g_mkl_reason, "%s", s);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(mkl_info_doc,
"mkl_info($module, /)\n"
"--\n\n"
"None when oneMKL is not loaded, else a dict with its version string and the\n"
"threading layer it reported (1 = sequential).\n");

static PyObject *py_mkl_info(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (!sinpe_mkl_loaded())
        return Py_BuildValue("{s:O,s:s}", "loaded", Py_False, "reason", g_mkl_reason);
    return Py_BuildValue("{s:O,s:s,s:i}", "loaded", Py_True, "version", sinpe_mkl_version(),
                         "threading_layer", sinpe_mkl_threading_layer());
}

PyDoc_STRVAR(set_backend_doc,
"set_backend($module, name, /)\n"
"--\n\n"
"Set the default backend: 'builtin' or 'mkl'.  Raises if it is unavailable.\n");

static PyObject *py_set_backend(PyObject *self, PyObject *arg)
{
    module_state *ms = state_of(self);
    sinpe_backend be;
    if (arg == Py_None) {
        PyErr_SetString(PyExc_TypeError, "backend name must be 'builtin' or 'mkl', got None");
        return NULL;
    }
    if (get_backend(ms, arg, &be) < 0)
        return NULL;
    ms->backend = be;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(get_backend_doc,
"get_backend($module, /)\n"
"--\n\n"
"The name of the default backend.\n");

static PyObject *py_get_backend(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyUnicode_FromString(BACKEND_NAMES[state_of(self)->backend]);
}

PyDoc_STRVAR(set_threads_doc,
"set_threads($module, n, /)\n"
"--\n\n"
"Set the default number of worker threads (1 to 256).\n");

static PyObject *py_set_threads(PyObject *self, PyObject *arg)
{
    module_state *ms = state_of(self);
    int t;
    if (arg == Py_None) {
        PyErr_SetString(PyExc_TypeError, "threads must be an integer, got None");
        return NULL;
    }
    if (get_threads(ms, arg, &t) < 0)
        return NULL;
    ms->threads = t;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(get_threads_doc,
"get_threads($module, /)\n"
"--\n\n"
"The default number of worker threads.\n");

static PyObject *py_get_threads(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromLong(state_of(self)->threads);
}

PyDoc_STRVAR(kernels_doc,
"kernels($module, /)\n"
"--\n\n"
"The built-in backend's code paths this CPU can run, fastest last.\n");

static PyObject *py_kernels(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyObject *l = PyList_New(0);
    for (int k = 0; l && k < SINPE_KERNEL_COUNT; k++) {
        if (!sinpe_kernel_available((sinpe_kernel)k))
            continue;
        PyObject *n = PyUnicode_FromString(sinpe_kernel_name((sinpe_kernel)k));
        if (!n || PyList_Append(l, n) < 0) {
            Py_XDECREF(n);
            Py_DECREF(l);
            return NULL;
        }
        Py_DECREF(n);
    }
    return l;
}

PyDoc_STRVAR(set_kernel_doc,
"set_kernel($module, name, /)\n"
"--\n\n"
"Force the built-in backend's code path: 'scalar', 'avx2' (x86-64 with AVX2\n"
"and FMA) or 'neon' (AArch64).  Every path gives the same bits.\n");

static PyObject *py_set_kernel(PyObject *self, PyObject *arg)
{
    module_state *ms = state_of(self);
    for (int k = 0; k < SINPE_KERNEL_COUNT; k++) {
        if (PyUnicode_Check(arg)
            && PyUnicode_CompareWithASCIIString(arg, sinpe_kernel_name((sinpe_kernel)k)) == 0) {
            if (!sinpe_kernel_available((sinpe_kernel)k)) {
                PyErr_Format(PyExc_RuntimeError,
                             "kernel %R is not available: this build or CPU lacks it", arg);
                return NULL;
            }
            ms->kernel = (sinpe_kernel)k;
            Py_RETURN_NONE;
        }
    }
    PyErr_Format(PyExc_ValueError, "unknown kernel %R: choose 'scalar', 'avx2' or 'neon'", arg);
    return NULL;
}

PyDoc_STRVAR(get_kernel_doc,
"get_kernel($module, /)\n"
"--\n\n"
"The built-in backend's code path in use.\n");

static PyObject *py_get_kernel(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyUnicode_FromString(sinpe_kernel_name(state_of(self)->kernel));
}

static PyMethodDef methods[] = {
    { "set_threads", py_set_threads, METH_O, set_threads_doc },
    { "get_threads", py_get_threads, METH_NOARGS, get_threads_doc },
    { "kernels", py_kernels, METH_NOARGS, kernels_doc },
    { "set_kernel", py_set_kernel, METH_O, set_kernel_doc },
    { "get_kernel", py_get_kernel, METH_NOARGS, get_kernel_doc },
    { "positional_encoding", (PyCFunction)(void (*)(void))py_positional_encoding,
      METH_VARARGS | METH_KEYWORDS, pe_doc },
    { "add_pe", (PyCFunction)(void (*)(void))py_add_pe, METH_VARARGS | METH_KEYWORDS, add_doc },
    { "elementwise", (PyCFunction)(void (*)(void))py_elementwise, METH_VARARGS | METH_KEYWORDS,
      elementwise_doc },
    { "load_mkl", py_load_mkl, METH_O, load_mkl_doc },
    { "_set_mkl_unavailable", py_set_unavailable, METH_O, set_unavailable_doc },
    { "mkl_info", py_mkl_info, METH_NOARGS, mkl_info_doc },
    { "set_backend", py_set_backend, METH_O, set_backend_doc },
    { "get_backend", py_get_backend, METH_NOARGS, get_backend_doc },
    { NULL, NULL, 0, NULL },
};

static int module_exec(PyObject *m)
{
    import_array1(-1);
    module_state *ms = state_of(m);
    ms->backend = SINPE_BACKEND_BUILTIN;
    ms->kernel = sinpe_kernel_best(); /* CPU probe, once per import */
    ms->threads = 1;
    return 0;
}

static PyModuleDef_Slot slots[] = {
    { Py_mod_exec, (void *)module_exec },
    { 0, NULL },
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_sinpe", "C core binding of sinpe.", sizeof(module_state), methods,
    slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__sinpe(void)
{
    return PyModuleDef_Init(&moduledef);
}
