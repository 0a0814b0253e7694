/* _sinpe: the CPython / NumPy binding of the sinpe core.
 *
 * Thin: it turns Python arguments into a core job (sinpe_job), runs it with
 * the GIL released in steps that check for signals, and maps a core status
 * to an exception naming the bad value.  Every rule about sizes, offsets,
 * layouts and overlaps lives in the core (sinpe_job_check); this file only
 * knows how Python spells things:
 *   - one parser for the shared parameters (base, offset, dtype, backend,
 *     threads): parse_common;
 *   - one way to see an array or buffer (ndarray, memoryview, ctypes, ...):
 *     view_get;
 *   - one loop that releases the GIL and checks signals: run_job;
 *   - one status-to-exception mapper: raise_status.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sinpe_core.h"

/* The backends a call can name directly; 'auto' and 'sleef' (and any name
 * whose library is not loaded yet) go through the package's resolver
 * (sinpe/_choice.py), which chooses, loads and explains. */
static const struct {
    const char *name;
    sinpe_backend backend;
    sinpe_sleef_trig trig; /* SLEEF profiles: torch's variant and vector width */
    int lanes;
} BACKENDS[] = {
    { "builtin", SINPE_BACKEND_BUILTIN, 0, 0 },
    { "mkl", SINPE_BACKEND_MKL, 0, 0 },
    { "torch", SINPE_BACKEND_TORCH, 0, 0 },
    /* torch on 64-bit Arm (../shared/notes/torch-arm64.md, and 2.14.1 measured here):
     * DEFAULT (NEON) and SVE128 use 4-lane vectors, SVE256 8-lane ones; 2.13 and 2.14 call
     * SLEEF's u10 sin/cos, 2.15 the u35 */
    { "torch-aarch64-2.13", SINPE_BACKEND_SLEEF, SINPE_SLEEF_U10, 4 },
    { "torch-aarch64-2.13-sve256", SINPE_BACKEND_SLEEF, SINPE_SLEEF_U10, 8 },
    { "torch-aarch64-2.14", SINPE_BACKEND_SLEEF, SINPE_SLEEF_U10, 4 },
    { "torch-aarch64-2.14-sve256", SINPE_BACKEND_SLEEF, SINPE_SLEEF_U10, 8 },
    { "torch-aarch64-2.15", SINPE_BACKEND_SLEEF, SINPE_SLEEF_U35, 4 },
    { "torch-aarch64-2.15-sve256", SINPE_BACKEND_SLEEF, SINPE_SLEEF_U35, 8 },
};
#define NBACKENDS ((int)(sizeof BACKENDS / sizeof BACKENDS[0]))
static const char *VML_NAMES[SINPE_VML_COUNT] = { "mkl", "torch" };
static const char *TYPE_NAMES[4] = { "float32", "float64", "float16", "bfloat16" };

/* Per-module state (multi-phase init: each interpreter, each module object,
 * has its own defaults).  The oneMKL library itself is process-wide. */
typedef struct {
    PyObject *backend;  /* the default: 'auto' or a backend name (str) */
    PyObject *resolver; /* sinpe._choice.resolve, set by the package (or NULL) */
    sinpe_path path;    /* the built-in backend's code path ("kernel" in Python) */
    int threads;
} module_state;

static module_state *state_of(PyObject *module)
{
    return (module_state *)PyModule_GetState(module);
}

/* Jobs run in steps of about this many values per thread, with the GIL
 * released; between steps pending signals are handled, so Ctrl-C stops any
 * call within milliseconds (2M values: about 20 ms on the scalar path). */
#define SINPE_STEP_VALUES ((int64_t)1 << 21)

/* ---- errors: one mapper ------------------------------------------------- */

/* What a call was doing, for messages that name the bad value. */
typedef struct {
    const char *what;      /* "out" or "x": the destination's name */
    const char *rows_name; /* "max_len" or "seq_len" */
    const sinpe_job *job;
    PyObject *base;        /* as the user gave it (NULL: the default) */
    const char *backend;
} call_ctx;

static PyObject *shape_tuple(int n, const int64_t *shape)
{
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) {
        PyObject *v = PyLong_FromLongLong(shape[i]);
        if (!v) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

static void raise_status(int st, const call_ctx *c)
{
    const sinpe_job *j = c->job;
    int nd = j ? j->ndim : 0;
    long long d = nd ? (long long)j->shape[nd - 1] : 0;
    long long rows = nd >= 2 ? (long long)j->shape[nd - 2] : 0;
    const char *tname = j && (int)j->type >= 0 && j->type <= SINPE_BF16 ? TYPE_NAMES[j->type] : "?";
    PyObject *shape = NULL;
    switch (st) {
    case SINPE_E_DMODEL:
        if (c->what[0] == 'x')
            PyErr_Format(PyExc_ValueError, "d_model must be an even integer >= 2, got %lld "
                         "(x.shape[-1])", d);
        else
            PyErr_Format(PyExc_ValueError, "d_model must be an even integer >= 2, got %lld", d);
        break;
    case SINPE_E_ROWS:
        PyErr_Format(PyExc_ValueError, "%s must be >= 0, got %lld", c->rows_name, rows);
        break;
    case SINPE_E_BASE:
        if (c->base)
            PyErr_Format(PyExc_ValueError, "base must be finite and > 0, got %R", c->base);
        else
            PyErr_Format(PyExc_ValueError, "base must be finite and > 0, got %g", j->base);
        break;
    case SINPE_E_OFFSET:
        PyErr_Format(PyExc_ValueError, "offset must be >= 0, got %lld", (long long)j->offset);
        break;
    case SINPE_E_LASTPOS:
        PyErr_Format(PyExc_OverflowError,
                     "offset=%lld is too large for %lld rows: the last position, offset + %lld, "
                     "does not fit in int64", (long long)j->offset, rows, rows - 1);
        break;
    case SINPE_E_SIZE:
        shape = shape_tuple(nd, j->shape);
        if (!shape)
            break;
        if (d > ((int64_t)1 << 60) / sinpe_type_size(j->type))
            PyErr_Format(PyExc_OverflowError, "d_model=%lld is too large: one row of that many "
                         "%s values is larger than memory can address", d, tname);
        else if (j->use_pos || c->what[0] == 'x')
            PyErr_Format(PyExc_OverflowError, "%s (shape %R, %s) or its positions reach more "
                         "bytes than memory can address", c->what, shape, tname);
        else
            PyErr_Format(PyExc_OverflowError, "a table of shape %R of %s values is larger than "
                         "memory can address", shape, tname);
        break;
    case SINPE_E_OVERLAP:
        PyErr_Format(PyExc_ValueError,
                     "%s has elements that share memory (a zero or overlapping stride, as from "
                     "np.broadcast_to or as_strided): writing it in place would be ill-defined; "
                     "pass a copy (np.ascontiguousarray)", c->what);
        break;
    case SINPE_E_UNDECIDED:
        PyErr_Format(PyExc_ValueError,
                     "%s has strides for which sinpe could not decide within its search budget "
                     "whether elements share memory; pass a copy (np.ascontiguousarray)", c->what);
        break;
    case SINPE_E_BACKEND:
        PyErr_Format(PyExc_RuntimeError, "backend %s is not available", c->backend);
        break;
    case SINPE_E_PATH:
        PyErr_SetString(PyExc_RuntimeError, "the selected kernel path is not available here");
        break;
    case SINPE_E_NOMEM:
        PyErr_SetString(PyExc_MemoryError, "out of memory for sinpe's scratch space");
        break;
    case SINPE_E_THREADS:
        PyErr_SetString(PyExc_ValueError, "threads must be between 1 and 256");
        break;
    case SINPE_E_TABLE:
        PyErr_Format(PyExc_ValueError, "max_len=%lld is smaller than offset + seq_len = %lld + %lld",
                     (long long)j->table_rows, (long long)j->offset, rows);
        break;
    case SINPE_E_NULL:
        PyErr_Format(PyExc_ValueError, "%s: the buffer has no memory (a NULL pointer)", c->what);
        break;
    case SINPE_E_SPEC:
        PyErr_SetString(PyExc_ValueError, "sinpe: inconsistent preset table description");
        break;
    default:
        PyErr_Format(PyExc_RuntimeError, "sinpe: %s", sinpe_strerror(st));
        break;
    }
    Py_XDECREF(shape);
}

/* ---- the shared parameters ------------------------------------------------------------- */

static int is_bool(PyObject *o)
{
    return PyBool_Check(o) || PyArray_IsScalar(o, Bool)
           || (PyArray_Check(o) && PyArray_TYPE((PyArrayObject *)o) == NPY_BOOL);
}

static int get_int64(PyObject *o, const char *name, int64_t *v)
{
    if (is_bool(o) || !PyIndex_Check(o)) {
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
    int real = !is_bool(o) && !PyComplex_Check(o) && !PyArray_IsScalar(o, ComplexFloating)
               && !PyUnicode_Check(o) && !PyBytes_Check(o)
               && (PyFloat_Check(o) || PyLong_Check(o) || PyArray_IsScalar(o, Number)
                   || (Py_TYPE(o)->tp_as_number && Py_TYPE(o)->tp_as_number->nb_float));
    if (!real) {
        PyErr_Format(PyExc_TypeError, "base must be a real number, got %R (%s)", o,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    double b = PyFloat_AsDouble(o);
    if (b == -1.0 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_OverflowError, "base=%R is too large for a float64", o);
        } else if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "base must be a real number, got %R (%s)", o,
                         Py_TYPE(o)->tp_name);
        }
        return -1;
    }
    *base = b; /* finite and > 0: the core's rule (SINPE_E_BASE) */
    return 0;
}

static int lookup_backend(PyObject *name)
{
    for (int i = 0; i < NBACKENDS; i++)
        if (PyUnicode_CompareWithASCIIString(name, BACKENDS[i].name) == 0)
            return i;
    return -1;
}

static int backend_ready(sinpe_backend be)
{
    if (be == SINPE_BACKEND_MKL || be == SINPE_BACKEND_TORCH)
        return sinpe_vml_loaded(be == SINPE_BACKEND_MKL ? SINPE_VML_MKL : SINPE_VML_TORCH);
    return 1;
}

/* torch_threads= for the SLEEF profiles: torch's thread count when the table was built. */
static int get_torch_threads(PyObject *o, int *t)
{
    int64_t v;
    if (get_int64(o, "torch_threads", &v) < 0)
        return -1;
    if (v < 1 || v > 4096) {
        PyErr_Format(PyExc_ValueError, "torch_threads must be between 1 and 4096, got %lld",
                     (long long)v);
        return -1;
    }
    *t = (int)v;
    return 0;
}

/* The backend a call uses: o (a name), or the module's default, with torch_threads (o_tt)
 * for the SLEEF profiles.  A name that is not a ready backend ('auto', 'sleef', 'torch'
 * before its library is loaded, a SLEEF profile, whose default thread count the package
 * knows, an unknown name) is handed to the package's resolver, which returns (concrete
 * name, default torch threads) or raises ValueError / RuntimeError saying why.  *name
 * points to static storage. */
static int get_backend(module_state *ms, PyObject *o, PyObject *o_tt, sinpe_opts *opts,
                       const char **name)
{
    PyObject *want = (o == NULL || o == Py_None) ? ms->backend : o;
    if (!PyUnicode_Check(want)) {
        PyErr_Format(PyExc_TypeError, "backend must be a backend name (str) or None, got %R (%s)",
                     want, Py_TYPE(want)->tp_name);
        return -1;
    }
    int k = lookup_backend(want), tt = 1;
    if (k < 0 || !backend_ready(BACKENDS[k].backend) || BACKENDS[k].backend == SINPE_BACKEND_SLEEF) {
        if (!ms->resolver) {
            PyErr_Format(k < 0 ? PyExc_ValueError : PyExc_RuntimeError,
                         k < 0 ? "unknown backend %R" : "backend %R is not available", want);
            return -1;
        }
        PyObject *got = PyObject_CallFunctionObjArgs(ms->resolver, want, NULL);
        if (!got)
            return -1;
        PyObject *gname = PyTuple_Check(got) && PyTuple_GET_SIZE(got) == 2 ? PyTuple_GET_ITEM(got, 0)
                                                                          : NULL;
        k = gname && PyUnicode_Check(gname) ? lookup_backend(gname) : -1;
        long t = k >= 0 ? PyLong_AsLong(PyTuple_GET_ITEM(got, 1)) : 0;
        Py_DECREF(got);
        if (t == -1 && PyErr_Occurred())
            return -1;
        if (k < 0 || !backend_ready(BACKENDS[k].backend)) {
            PyErr_Format(PyExc_RuntimeError, "backend %R could not be made available", want);
            return -1;
        }
        tt = t > 0 ? (int)t : 1;
    }
    if (o_tt && o_tt != Py_None && get_torch_threads(o_tt, &tt) < 0)
        return -1;
    if (opts) {
        opts->backend = BACKENDS[k].backend;
        opts->sleef.trig = BACKENDS[k].trig;
        opts->sleef.lanes = BACKENDS[k].lanes;
        opts->sleef.torch_threads = tt;
    }
    if (name)
        *name = BACKENDS[k].name;
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
    if (t < 1 || t > SINPE_MAX_THREADS) {
        PyErr_Format(PyExc_ValueError, "threads must be between 1 and 256, got %lld",
                     (long long)t);
        return -1;
    }
    *threads = (int)t;
    return 0;
}

/* The element type of a NumPy dtype: 0 and *t for the four table types,
 * 1 for one of them in non-native byte order, -1 for anything else. */
static int table_type(PyArray_Descr *d, sinpe_type *t)
{
    int n = d->type_num;
    if (n == NPY_FLOAT || n == NPY_DOUBLE || n == NPY_HALF) {
        *t = n == NPY_FLOAT ? SINPE_F32 : n == NPY_DOUBLE ? SINPE_F64 : SINPE_F16;
        return PyArray_ISNBO(d->byteorder) ? 0 : 1;
    }
    const char *name = d->typeobj ? d->typeobj->tp_name : "";
    const char *dot = strrchr(name, '.');
    if (n >= NPY_USERDEF && PyDataType_ELSIZE(d) == 2 && !strcmp(dot ? dot + 1 : name, "bfloat16")) {
        *t = SINPE_BF16;
        return 0;
    }
    return -1;
}

static int dtype_error(PyObject *o)
{
    PyErr_Format(PyExc_TypeError, "dtype must be float32, float16, bfloat16 or float64, got %R",
                 o);
    return -1;
}

/* dtype= as NumPy spells it (every spelling np.dtype accepts: 'f4', '<f4',
 * 'e', 'd', float and 'float' are float64, ...), 'bfloat16' (imports
 * ml_dtypes) or a torch dtype; None is float32.  A new reference in *descr. */
static int get_dtype(PyObject *o, PyArray_Descr **descr, sinpe_type *t)
{
    *descr = NULL;
    if (o == NULL || o == Py_None) {
        *descr = PyArray_DescrFromType(NPY_FLOAT);
        *t = SINPE_F32;
        return *descr ? 0 : -1;
    }
    PyObject *spelled = NULL; /* a torch dtype: its name without "torch." */
    PyTypeObject *tp = Py_TYPE(o);
    if (!strcmp(tp->tp_name, "torch.dtype")) {
        PyObject *s = PyObject_Str(o);
        if (!s)
            return -1;
        const char *txt = PyUnicode_AsUTF8(s);
        spelled = txt && !strncmp(txt, "torch.", 6) ? PyUnicode_FromString(txt + 6) : NULL;
        Py_DECREF(s);
        if (!spelled)
            return dtype_error(o);
    }
    PyObject *key = spelled ? spelled : o;
    if (PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, "bfloat16") == 0) {
        PyObject *m = PyImport_ImportModule("ml_dtypes");
        if (!m) {
            Py_XDECREF(spelled);
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "dtype bfloat16 needs the ml_dtypes package "
                                             "(pip install 'sinpe[bfloat16]')");
            return -1;
        }
        Py_DECREF(m);
    }
    int ok = PyArray_DescrConverter(key, descr);
    Py_XDECREF(spelled);
    if (!ok) {
        PyErr_Clear();
        return dtype_error(o);
    }
    int k = table_type(*descr, t);
    if (k != 0) {
        Py_CLEAR(*descr);
        if (k > 0) {
            PyErr_Format(PyExc_TypeError, "dtype %R is not in native byte order: sinpe writes "
                                          "native float32, float16, bfloat16 or float64", o);
            return -1;
        }
        return dtype_error(o);
    }
    return 0;
}

typedef struct {
    double base;
    int64_t offset;
    int have_offset;
    sinpe_opts opts;
    const char *backend_name;
} common_args;

/* The parameters every call shares, parsed one way. */
static int parse_common(module_state *ms, PyObject *o_base, PyObject *o_off, PyObject *o_be,
                        PyObject *o_tt, PyObject *o_thr, common_args *c)
{
    c->offset = 0;
    c->have_offset = o_off != NULL;
    if (get_base(o_base, &c->base) < 0
        || (o_off && get_int64(o_off, "offset", &c->offset) < 0)
        || get_backend(ms, o_be, o_tt, &c->opts, &c->backend_name) < 0
        || get_threads(ms, o_thr, &c->opts.threads) < 0)
        return -1;
    c->opts.path = ms->path;
    return 0;
}

/* ---- views of arrays and buffers ------------------------------------------------------ */

typedef struct {
    Py_buffer buf;
    int have_buf;
    PyArray_Descr *descr; /* the ndarray's dtype (borrowed), NULL for other buffers */
    char *data;
    int ndim;
    int64_t shape[SINPE_MAX_DIMS], strides[SINPE_MAX_DIMS];
    sinpe_type type;
} view;

static void view_release(view *v)
{
    if (v->have_buf)
        PyBuffer_Release(&v->buf);
    v->have_buf = 0;
}

static const char *format_name(const char *fmt, int *swapped)
{
    *swapped = 0;
    if (!fmt)
        return "uint8 (no format)";
    const char *f = fmt;
    if (*f == '>' || *f == '!')
        *swapped = !PY_BIG_ENDIAN;
    if (*f == '<')
        *swapped = PY_BIG_ENDIAN;
    if (*f == '<' || *f == '=' || *f == '@' || *f == '>' || *f == '!')
        f++;
    static const struct { const char *c, *name; } names[] = {
        { "f", "float32" }, { "d", "float64" }, { "e", "float16" }, { "b", "int8" },
        { "B", "uint8" }, { "h", "int16" }, { "H", "uint16" }, { "i", "int32" },
        { "I", "uint32" }, { "l", "int64" }, { "L", "uint64" }, { "q", "int64" },
        { "Q", "uint64" }, { "?", "bool" }, { "g", "float128" }, { "Zf", "complex64" },
        { "Zd", "complex128" },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(f, names[i].c) == 0)
            return names[i].name;
    return fmt;
}

static int not_an_array(PyObject *o, const char *what)
{
    const char *hint = !strncmp(Py_TYPE(o)->tp_name, "torch.", 6) || !strcmp(Py_TYPE(o)->tp_name, "Tensor")
                           ? "; for a torch CPU tensor pass t.numpy()" : "";
    PyErr_Format(PyExc_TypeError, "%s must be a writable array of float32, float16, bfloat16 or "
                 "float64 (a NumPy array or an object with the buffer protocol), got %s%s", what,
                 Py_TYPE(o)->tp_name, hint);
    return -1;
}

static int wrong_type(const char *what, const char *got, int swapped)
{
    if (swapped)
        PyErr_Format(PyExc_TypeError, "%s must be in native byte order, got big-endian %s: "
                     "sinpe writes native float32, float16, bfloat16 or float64", what, got);
    else
        PyErr_Format(PyExc_TypeError, "%s must have dtype float32, float16, bfloat16 or "
                     "float64, got %s", what, got);
    return -1;
}

/* A writable array of one of the four table types, as an ndarray or any
 * exporter of the buffer protocol (NULL strides mean C-contiguous, NULL shape
 * means one axis; indirect buffers are refused).  Nothing is copied. */
static int view_get(PyObject *o, const char *what, view *v)
{
    memset(v, 0, sizeof *v);
    if (PyArray_Check(o)) {
        PyArrayObject *a = (PyArrayObject *)o;
        PyArray_Descr *d = PyArray_DESCR(a);
        int k = table_type(d, &v->type);
        if (k != 0) {
            PyObject *s = PyObject_Str((PyObject *)d);
            const char *txt = s ? PyUnicode_AsUTF8(s) : NULL;
            if (txt)
                wrong_type(what, k > 0 ? TYPE_NAMES[v->type] : txt, k > 0);
            Py_XDECREF(s);
            return -1;
        }
        if (!PyArray_ISWRITEABLE(a)) {
            PyErr_Format(PyExc_ValueError, "%s is read-only", what);
            return -1;
        }
        if (PyArray_NDIM(a) > SINPE_MAX_DIMS) {
            PyErr_Format(PyExc_ValueError, "%s has too many dimensions", what);
            return -1;
        }
        v->descr = d;
        v->data = PyArray_BYTES(a);
        v->ndim = PyArray_NDIM(a);
        for (int i = 0; i < v->ndim; i++) {
            v->shape[i] = PyArray_DIMS(a)[i];
            v->strides[i] = PyArray_STRIDES(a)[i];
        }
        return 0;
    }
    if (!PyObject_CheckBuffer(o) || PyObject_GetBuffer(o, &v->buf, PyBUF_RECORDS_RO) < 0) {
        PyErr_Clear();
        return not_an_array(o, what);
    }
    v->have_buf = 1;
    Py_buffer *b = &v->buf;
    int swapped;
    const char *name = format_name(b->format, &swapped);
    int fmt_ok = !swapped && b->format && (!strcmp(name, "float32") || !strcmp(name, "float64")
                                            || !strcmp(name, "float16"));
    if (!fmt_ok || b->itemsize != (name[5] == '3' ? 4 : name[5] == '6' ? 8 : 2)) {
        wrong_type(what, name, swapped);
        goto fail;
    }
    v->type = name[5] == '3' ? SINPE_F32 : name[5] == '6' ? SINPE_F64 : SINPE_F16;
    if (b->readonly) {
        PyErr_Format(PyExc_ValueError, "%s is read-only", what);
        goto fail;
    }
    if (b->suboffsets) {
        PyErr_Format(PyExc_ValueError, "%s is an indirect buffer (suboffsets), which sinpe does "
                     "not write", what);
        goto fail;
    }
    if (b->ndim > SINPE_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s has too many dimensions", what);
        goto fail;
    }
    v->data = b->buf;
    v->ndim = b->shape ? b->ndim : 1;
    if (!b->shape)
        v->shape[0] = b->len / b->itemsize;
    for (int i = 0; b->shape && i < v->ndim; i++)
        v->shape[i] = b->shape[i];
    int64_t stride = b->itemsize; /* NULL strides: C-contiguous */
    for (int i = v->ndim - 1; i >= 0; i--) {
        v->strides[i] = b->strides ? b->strides[i] : stride;
        stride *= v->shape[i];
    }
    return 0;
fail:
    view_release(v);
    return -1;
}

/* ---- positions -------------------------------------------------------------------------- */

static int position_type(PyArray_Descr *d, sinpe_type *t)
{
    if (!PyArray_ISNBO(d->byteorder))
        return -1;
    int n = d->type_num, size = (int)PyDataType_ELSIZE(d);
    if (PyTypeNum_ISSIGNED(n) && PyTypeNum_ISINTEGER(n)) {
        *t = size == 1 ? SINPE_I8 : size == 2 ? SINPE_I16 : size == 4 ? SINPE_I32 : SINPE_I64;
        return size == 1 || size == 2 || size == 4 || size == 8 ? 0 : -1;
    }
    if (PyTypeNum_ISUNSIGNED(n)) {
        *t = size == 1 ? SINPE_U8 : size == 2 ? SINPE_U16 : size == 4 ? SINPE_U32 : SINPE_U64;
        return size == 1 || size == 2 || size == 4 || size == 8 ? 0 : -1;
    }
    if (n == NPY_FLOAT || n == NPY_DOUBLE || n == NPY_HALF) {
        *t = n == NPY_FLOAT ? SINPE_F32 : n == NPY_DOUBLE ? SINPE_F64 : SINPE_F16;
        return 0;
    }
    sinpe_type tt;
    if (table_type(d, &tt) == 0 && tt == SINPE_BF16) {
        *t = SINPE_BF16;
        return 0;
    }
    return -1;
}

/* An object array's elements: an int beyond int64/uint64 is an OverflowError
 * (as torch.tensor says), anything but a real number a TypeError; reals with
 * a float among them become float64. */
static PyArrayObject *positions_from_objects(PyArrayObject *a)
{
    int has_float = 0;
    npy_intp n = PyArray_SIZE(a);
    PyArrayObject *flat = (PyArrayObject *)PyArray_Ravel(a, NPY_CORDER);
    if (!flat)
        return NULL;
    PyObject **items = (PyObject **)PyArray_DATA(flat);
    for (npy_intp i = 0; i < n; i++) {
        PyObject *e = items[i];
        if (PyFloat_Check(e) || PyArray_IsScalar(e, Floating)) {
            has_float = 1;
        } else if (!is_bool(e) && (PyLong_Check(e) || PyArray_IsScalar(e, Integer))) {
            int overflow = 0;
            PyLong_AsLongLongAndOverflow(e, &overflow);
            if (overflow > 0) {
                unsigned long long u = PyLong_AsUnsignedLongLong(e);
                if (u == (unsigned long long)-1 && PyErr_Occurred()) {
                    PyErr_Clear();
                    overflow = 2;
                } else {
                    overflow = 0;
                }
            }
            if (overflow) {
                Py_DECREF(flat);
                PyErr_Format(PyExc_OverflowError, "positions: the integer %R does not fit in "
                             "int64 or uint64 (give such positions as floats)", e);
                return NULL;
            }
        } else {
            Py_DECREF(flat);
            PyErr_Format(PyExc_TypeError, "positions must be integers or real numbers, got %R "
                         "(%s)", e, Py_TYPE(e)->tp_name);
            return NULL;
        }
    }
    Py_DECREF(flat);
    return (PyArrayObject *)PyArray_FROM_OTF((PyObject *)a, has_float ? NPY_DOUBLE : NPY_INT64,
                                            NPY_ARRAY_FORCECAST);
}

/* positions= as an ndarray the core can read in place (a new reference):
 * integers of 1 to 8 bytes, float16/32/64 and bfloat16 are read as they are;
 * other real types (longdouble, other byte orders) are converted to float32
 * by NumPy first. */
static PyArrayObject *positions_get(PyObject *o, sinpe_type *t)
{
    PyArrayObject *a = (PyArrayObject *)PyArray_FROM_O(o);
    if (!a)
        return NULL;
    if (PyArray_TYPE(a) == NPY_OBJECT) {
        PyArrayObject *b = positions_from_objects(a);
        Py_DECREF(a);
        if (!b)
            return NULL;
        a = b;
    }
    if (position_type(PyArray_DESCR(a), t) == 0)
        return a;
    int n = PyArray_TYPE(a);
    if (!(PyTypeNum_ISINTEGER(n) || PyTypeNum_ISFLOAT(n)) || PyTypeNum_ISBOOL(n)) {
        PyErr_Format(PyExc_TypeError, "positions must be integers or real numbers, got dtype %R",
                     (PyObject *)PyArray_DESCR(a));
        Py_DECREF(a);
        return NULL;
    }
    PyArrayObject *f = (PyArrayObject *)PyArray_FROM_OTF((PyObject *)a, NPY_FLOAT32,
                                                        NPY_ARRAY_FORCECAST);
    Py_DECREF(a);
    *t = SINPE_F32;
    return f;
}

/* ---- running a job: the one loop that releases the GIL ------------------------------- */

static int check_memory(int64_t new_bytes, const sinpe_job *j, const sinpe_opts *o)
{
    int64_t mem = sinpe_physical_memory();
    int64_t scratch = sinpe_job_scratch_bytes(j, o);
    double need = (double)new_bytes + (double)scratch;
    if (mem <= 0 || need <= (double)mem)
        return 0;
    char msg[512];
    PyObject *shape = shape_tuple(j->ndim, j->shape);
    PyObject *s = shape ? PyObject_Repr(shape) : NULL;
    const char *txt = s ? PyUnicode_AsUTF8(s) : NULL;
    if (txt) {
        snprintf(msg, sizeof msg, "%s of shape %s (%s) needs %.1f GiB (%.1f GiB of it scratch), "
                 "more than this machine's %.1f GiB of memory",
                 new_bytes ? "a table" : "adding to an array", txt, TYPE_NAMES[j->type],
                 need / 1073741824.0, (double)scratch / 1073741824.0, (double)mem / 1073741824.0);
        PyErr_SetString(PyExc_MemoryError, msg);
    }
    Py_XDECREF(s);
    Py_XDECREF(shape);
    return -1;
}

/* Plans the job and runs it in steps with the GIL released, handling
 * signals between steps (an interrupted job has done a prefix of its work:
 * sinpe_core.h). */
static int run_job(const sinpe_job *j, const sinpe_opts *o, const call_ctx *c)
{
    sinpe_plan *p = NULL;
    int st, done = 0;
    Py_BEGIN_ALLOW_THREADS
    st = sinpe_plan_new(j, o, &p);
    Py_END_ALLOW_THREADS
    while (st == SINPE_OK) {
        Py_BEGIN_ALLOW_THREADS
        st = sinpe_plan_step(p, SINPE_STEP_VALUES * o->threads, &done);
        Py_END_ALLOW_THREADS
        if (st != SINPE_OK || done)
            break;
        if (PyErr_CheckSignals() < 0) {
            sinpe_plan_free(p);
            return -1;
        }
    }
    sinpe_plan_free(p);
    if (st != SINPE_OK) {
        raise_status(st, c);
        return -1;
    }
    return 0;
}

/* ---- tables ------------------------------------------------------------------------------ */

typedef struct {
    sinpe_job job;
    common_args args;
    call_ctx ctx;
    PyArrayObject *pos;    /* positions= as an array (owned) */
    PyArray_Descr *descr;  /* dtype= (owned) */
    view out;
    int have_out;
    PyObject *result;      /* the array returned (owned) */
} table_call;

static void table_call_clear(table_call *t)
{
    Py_CLEAR(t->pos);
    Py_CLEAR(t->descr);
    if (t->have_out)
        view_release(&t->out);
    t->have_out = 0;
}

/* Parses and checks a table call; on success the job is complete but for
 * its memory when out is None (t->result is then still NULL). */
static int table_prepare(PyObject *self, PyObject *o_len, PyObject *o_d, PyObject *o_base,
                         PyObject *o_pos, PyObject *o_off, PyObject *o_dtype, PyObject *o_out,
                         PyObject *o_be, PyObject *o_tt, PyObject *o_thr, table_call *t)
{
    module_state *ms = state_of(self);
    sinpe_job *j = &t->job;
    memset(j, 0, sizeof *j);
    t->ctx.what = "out";
    t->ctx.rows_name = "max_len";
    t->ctx.job = j;
    t->ctx.base = o_base ? o_base : NULL;
    if (o_d == Py_None) {
        PyErr_SetString(PyExc_TypeError, "positional_encoding() needs d_model");
        return -1;
    }
    if ((o_len == Py_None) == (o_pos == Py_None)) {
        PyErr_SetString(PyExc_TypeError,
                        "positional_encoding() needs exactly one of max_len and positions");
        return -1;
    }
    int64_t max_len = 0, d_model;
    if ((o_len != Py_None && get_int64(o_len, "max_len", &max_len) < 0)
        || get_int64(o_d, "d_model", &d_model) < 0
        || parse_common(ms, o_base, o_off, o_be, o_tt, o_thr, &t->args) < 0)
        return -1;
    t->ctx.backend = t->args.backend_name;
    if (o_pos != Py_None && t->args.offset != 0) {
        PyErr_SetString(PyExc_ValueError, "offset and positions exclude each other");
        return -1;
    }
    j->base = t->args.base;
    j->offset = t->args.offset;
    if (o_pos != Py_None) {
        /* d_model first: a bad d_model is reported before positions are read */
        int64_t one[1] = { d_model };
        sinpe_job probe;
        sinpe_job_init(&probe, NULL, 1, one, j->base);
        probe.use_pos = 1;
        int st = sinpe_job_check(&probe, &t->args.opts);
        if (st == SINPE_E_DMODEL || st == SINPE_E_BASE || st == SINPE_E_SIZE) {
            t->ctx.job = &probe;
            raise_status(st, &t->ctx);
            t->ctx.job = j;
            return -1;
        }
        t->pos = positions_get(o_pos, &j->pos_type);
        if (!t->pos)
            return -1;
        int pn = PyArray_NDIM(t->pos);
        if (pn + 1 > SINPE_MAX_DIMS) {
            PyErr_SetString(PyExc_ValueError, "positions has too many dimensions");
            return -1;
        }
        j->use_pos = 1;
        j->pos = PyArray_BYTES(t->pos);
        j->ndim = pn + 1;
        for (int i = 0; i < pn; i++) {
            j->shape[i] = PyArray_DIMS(t->pos)[i];
            j->pos_strides[i] = PyArray_STRIDES(t->pos)[i];
        }
        j->shape[pn] = d_model;
    } else {
        j->ndim = 2;
        j->shape[0] = max_len;
        j->shape[1] = d_model;
    }
    sinpe_type want;
    if (o_dtype != Py_None || o_out == Py_None) {
        if (get_dtype(o_dtype, &t->descr, &want) < 0)
            return -1;
    }
    if (o_out != Py_None) {
        if (view_get(o_out, "out", &t->out) < 0)
            return -1;
        t->have_out = 1;
        if (t->descr && want != t->out.type) {
            PyErr_Format(PyExc_TypeError, "out has dtype %s but dtype=%R asks for %s",
                         TYPE_NAMES[t->out.type], o_dtype, TYPE_NAMES[want]);
            return -1;
        }
        /* the result's shape, or (1, max_len, d_model) (a torch pe buffer) */
        view *v = &t->out;
        int same = v->ndim == j->ndim, lead1 = 0;
        for (int i = 0; same && i < j->ndim; i++)
            same = v->shape[i] == j->shape[i];
        if (!same && !j->use_pos && v->ndim == 3 && v->shape[0] == 1 && v->shape[1] == j->shape[0]
            && v->shape[2] == j->shape[1])
            lead1 = 1;
        if (!same && !lead1) {
            PyObject *got = shape_tuple(v->ndim, v->shape), *exp = shape_tuple(j->ndim, j->shape);
            if (got && exp) {
                if (j->use_pos)
                    PyErr_Format(PyExc_ValueError, "out has shape %R; expected %R", got, exp);
                else
                    PyErr_Format(PyExc_ValueError, "out has shape %R; expected %R or (1, %lld, %lld)",
                                 got, exp, (long long)j->shape[0], (long long)j->shape[1]);
            }
            Py_XDECREF(got);
            Py_XDECREF(exp);
            return -1;
        }
        j->ndim = v->ndim;
        for (int i = 0; i < v->ndim; i++) {
            j->shape[i] = v->shape[i];
            j->strides[i] = v->strides[i];
        }
        j->type = v->type;
        j->data = v->data;
    } else {
        j->type = want;
        int64_t s = sinpe_type_size(want), cap = (int64_t)1 << 60;
        for (int i = j->ndim - 1; i >= 0; i--) { /* C order (saturated: the check refuses) */
            j->strides[i] = s;
            int64_t n = j->shape[i] > 1 ? j->shape[i] : 1;
            s = s > cap / n ? cap : s * n;
        }
    }
    int st = sinpe_job_check(j, &t->args.opts);
    if (st != SINPE_OK) {
        raise_status(st, &t->ctx);
        return -1;
    }
    int64_t new_bytes = 0;
    if (!t->have_out) {
        new_bytes = sinpe_type_size(j->type);
        for (int i = 0; i < j->ndim; i++)
            new_bytes *= j->shape[i]; /* bounded by the core's size check */
    }
    return check_memory(new_bytes, j, &t->args.opts);
}

/* How fresh results are prepared (SINPE_FRESH=plain|huge for measurements; huge pages by
 * default: README, Speed). */
static int fresh_mode(void)
{
    static int mode = -1;
    if (mode < 0) {
        const char *e = getenv("SINPE_FRESH");
        mode = e && !strcmp(e, "plain") ? SINPE_FRESH_PLAIN : SINPE_FRESH_HUGE;
    }
    return mode;
}

/* The fresh result array of a prepared call (its job's memory). */
static int table_allocate(table_call *t)
{
    sinpe_job *j = &t->job;
    npy_intp dims[SINPE_MAX_DIMS];
    for (int i = 0; i < j->ndim; i++)
        dims[i] = (npy_intp)j->shape[i];
    Py_INCREF(t->descr);
    t->result = PyArray_NewFromDescr(&PyArray_Type, t->descr, j->ndim, dims, NULL, NULL, 0, NULL);
    if (!t->result)
        return -1;
    PyArrayObject *r = (PyArrayObject *)t->result;
    j->data = PyArray_BYTES(r);
    for (int i = 0; i < j->ndim; i++)
        j->strides[i] = PyArray_STRIDES(r)[i];
    sinpe_fresh_memory(j->data, (int64_t)PyArray_NBYTES(r), fresh_mode());
    return 0;
}

#define TABLE_KWLIST                                                                           \
    { "max_len", "d_model", "base", "positions", "offset", "dtype", "out", "backend",          \
      "torch_threads", "threads", NULL }

PyDoc_STRVAR(pe_doc,
"positional_encoding($module, /, max_len=None, d_model=None, base=10000.0, *, positions=None,\n"
"                    offset=0, dtype=None, out=None, backend=None, torch_threads=None,\n"
"                    threads=None)\n"
"--\n\n"
"Sinusoidal positional-encoding table, shape (max_len, d_model).\n\n"
"pe[pos, 2i] = sin(pos * div[i]) and pe[pos, 2i+1] = cos(pos * div[i]) with\n"
"div[i] = exp(2i * -log(base) / d_model), computed step by step in float32 as\n"
"the reference PyTorch module does (bit for bit with torch on the 'mkl' backend).\n\n"
"offset: the first row's position (rows offset .. offset+max_len-1).\n"
"positions: instead of max_len, an array of positions of any shape (integers,\n"
"     or reals rounded to float32 as torch's .float() does; negative and\n"
"     fractional positions work); the result has shape positions.shape + (d_model,).\n"
"dtype: float32 (default), float16, bfloat16 (with ml_dtypes) or float64, in\n"
"     any spelling np.dtype accepts (or a torch dtype); rounded from the float32\n"
"     values as torch's .half(), .bfloat16() and .double() round them.\n"
"out: a writable array or buffer (NumPy array, memoryview, ctypes array, the\n"
"     NumPy view of a torch CPU tensor) of the result's shape, or of\n"
"     (1, max_len, d_model), in any layout whose elements do not share memory;\n"
"     filled and returned.  Its dtype is the result's (dtype= must agree).\n"
"backend: None (sinpe.get_backend(): 'auto' chooses torch's bits when it can),\n"
"     'torch' (the installed torch's own kernels), 'mkl' (the mkl wheel), 'builtin'\n"
"     (correctly rounded), 'sleef' or a 'torch-aarch64-...' profile (torch on 64-bit Arm).\n"
"torch_threads: for the 'sleef' profiles, torch's thread count (its vectors depend on\n"
"     it); None: the running torch's, or torch's default.\n"
"threads: worker threads (None: sinpe.get_threads()); the bits do not depend on it.\n");

static PyObject *py_positional_encoding(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = TABLE_KWLIST;
    PyObject *o_len = Py_None, *o_d = Py_None, *o_base = NULL, *o_pos = Py_None, *o_off = NULL;
    PyObject *o_dtype = Py_None, *o_out = Py_None, *o_be = NULL, *o_tt = NULL, *o_thr = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOO$OOOOOOO:positional_encoding", kwlist,
                                     &o_len, &o_d, &o_base, &o_pos, &o_off, &o_dtype, &o_out,
                                     &o_be, &o_tt, &o_thr))
        return NULL;
    table_call t;
    memset(&t, 0, sizeof t);
    if (table_prepare(self, o_len, o_d, o_base, o_pos, o_off, o_dtype, o_out, o_be, o_tt, o_thr,
                      &t) < 0
        || (!t.have_out && table_allocate(&t) < 0)
        || run_job(&t.job, &t.args.opts, &t.ctx) < 0) {
        table_call_clear(&t);
        Py_XDECREF(t.result);
        return NULL;
    }
    table_call_clear(&t);
    if (!t.result) {
        t.result = o_out;
        Py_INCREF(o_out);
    }
    return t.result;
}

PyDoc_STRVAR(empty_table_doc,
"empty_table($module, /, max_len, d_model, base=10000.0, *, dtype=None, backend=None,\n"
"            torch_threads=None, threads=None)\n"
"--\n\n"
"An uninitialized array of the shape and dtype positional_encoding would\n"
"return, after every check it makes (sizes, base, dtype, memory), for callers\n"
"that fill a table in pieces with out= and offset= (the command line).\n");

static PyObject *py_empty_table(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = { "max_len", "d_model", "base", "dtype", "backend", "torch_threads",
                              "threads", NULL };
    PyObject *o_len, *o_d, *o_base = NULL, *o_dtype = Py_None, *o_be = NULL, *o_tt = NULL;
    PyObject *o_thr = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O$OOOO:empty_table", kwlist, &o_len, &o_d,
                                     &o_base, &o_dtype, &o_be, &o_tt, &o_thr))
        return NULL;
    table_call t;
    memset(&t, 0, sizeof t);
    if (table_prepare(self, o_len, o_d, o_base, Py_None, NULL, o_dtype, Py_None, o_be, o_tt, o_thr,
                      &t) < 0
        || table_allocate(&t) < 0) {
        table_call_clear(&t);
        Py_XDECREF(t.result);
        return NULL;
    }
    table_call_clear(&t);
    return t.result;
}

/* ---- add_pe ------------------------------------------------------------------------------ */

PyDoc_STRVAR(add_doc,
"add_pe($module, x, /, base=10000.0, *, offset=0, positions=None, max_len=None, backend=None,\n"
"       torch_threads=None, threads=None)\n"
"--\n\n"
"Add the positional encoding to x in place and return x.\n\n"
"x: a writable array of shape (seq_len, d_model) or (..., seq_len, d_model),\n"
"   dtype float32, float16, bfloat16 or float64, in any layout whose elements\n"
"   do not share memory (NumPy arrays and buffer-protocol objects).  Rows\n"
"   offset .. offset+seq_len-1 of the table are added to every element of the\n"
"   leading axes, bit for bit as the reference forward in eval mode (float32;\n"
"   other dtypes as torch's in-place x.add_(pe)).  Rows are computed, so there\n"
"   is no max_len limit.\n"
"positions: instead of offset, positions broadcastable to x.shape[:-1] (for\n"
"   packed sequences whose positions restart).\n"
"max_len: the length of the table the rows come from (the reference module's\n"
"   max_len; None: 5000 or offset+seq_len if larger); only the 'sleef' profiles'\n"
"   bits can depend on it.  backend, torch_threads, threads: as for\n"
"   positional_encoding.\n");

/* Strides (bytes) of positions broadcast to the n row axes of x; -1 when
 * their shapes do not broadcast to exactly those axes. */
static int broadcast_positions(PyArrayObject *pos, int n, const int64_t *shape, int64_t *strides)
{
    int pn = PyArray_NDIM(pos);
    if (pn > n)
        return -1;
    for (int i = 0; i < n; i++) {
        int k = i - (n - pn);
        if (k < 0) {
            strides[i] = 0;
        } else if (PyArray_DIMS(pos)[k] == shape[i]) {
            strides[i] = shape[i] == 1 ? 0 : PyArray_STRIDES(pos)[k];
        } else if (PyArray_DIMS(pos)[k] == 1) {
            strides[i] = 0;
        } else {
            return -1;
        }
    }
    return 0;
}

static PyObject *py_add_pe(PyObject *self, PyObject *args, PyObject *kw)
{
    module_state *ms = state_of(self);
    static char *kwlist[] = { "", "base", "offset", "positions", "max_len", "backend",
                              "torch_threads", "threads", NULL };
    PyObject *o_x, *o_base = NULL, *o_off = NULL, *o_pos = Py_None, *o_ml = Py_None;
    PyObject *o_be = NULL, *o_tt = NULL, *o_thr = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O$OOOOOO:add_pe", kwlist, &o_x, &o_base, &o_off,
                                     &o_pos, &o_ml, &o_be, &o_tt, &o_thr))
        return NULL;
    common_args a;
    sinpe_job j;
    memset(&j, 0, sizeof j);
    call_ctx ctx = { "x", "seq_len", &j, o_base, NULL };
    int64_t table_rows = 0;
    if (parse_common(ms, o_base, o_off, o_be, o_tt, o_thr, &a) < 0
        || (o_ml != Py_None && get_int64(o_ml, "max_len", &table_rows) < 0))
        return NULL;
    ctx.backend = a.backend_name;
    if (o_pos != Py_None && a.offset != 0) {
        PyErr_SetString(PyExc_ValueError, "offset and positions exclude each other");
        return NULL;
    }
    view v;
    if (view_get(o_x, "x", &v) < 0)
        return NULL;
    PyArrayObject *pos = NULL;
    if (v.ndim < 2) {
        PyObject *s = shape_tuple(v.ndim, v.shape);
        if (s)
            PyErr_Format(PyExc_ValueError,
                         "x must have at least 2 dimensions (..., seq_len, d_model), got shape %R", s);
        Py_XDECREF(s);
        goto fail;
    }
    j.data = v.data;
    j.type = v.type;
    j.ndim = v.ndim;
    memcpy(j.shape, v.shape, sizeof v.shape);
    memcpy(j.strides, v.strides, sizeof v.strides);
    j.add = 1;
    j.base = a.base;
    j.offset = a.offset;
    if (o_ml == Py_None) { /* the reference module's default table, or one that holds the rows */
        int64_t len = j.shape[j.ndim - 2];
        table_rows = j.offset <= 5000 - len ? 5000 : 0;
    } else if (table_rows < 0) {
        PyErr_Format(PyExc_ValueError, "max_len must be >= 0, got %lld", (long long)table_rows);
        goto fail;
    }
    j.table_rows = table_rows;
    if (o_pos != Py_None) {
        if (!(pos = positions_get(o_pos, &j.pos_type)))
            goto fail;
        if (broadcast_positions(pos, v.ndim - 1, v.shape, j.pos_strides) < 0) {
            int64_t pshape[SINPE_MAX_DIMS];
            for (int i = 0; i < PyArray_NDIM(pos) && i < SINPE_MAX_DIMS; i++)
                pshape[i] = PyArray_DIMS(pos)[i];
            PyObject *p = shape_tuple(PyArray_NDIM(pos), pshape);
            PyObject *xs = shape_tuple(v.ndim - 1, v.shape);
            if (p && xs)
                PyErr_Format(PyExc_ValueError, "positions of shape %R do not broadcast to "
                             "x.shape[:-1] = %R", p, xs);
            Py_XDECREF(p);
            Py_XDECREF(xs);
            goto fail;
        }
        j.use_pos = 1;
        j.pos = PyArray_BYTES(pos);
    }
    int st = sinpe_job_check(&j, &a.opts);
    if (st != SINPE_OK) {
        raise_status(st, &ctx);
        goto fail;
    }
    if (check_memory(0, &j, &a.opts) < 0 || run_job(&j, &a.opts, &ctx) < 0)
        goto fail;
    Py_XDECREF(pos);
    view_release(&v);
    Py_INCREF(o_x);
    return o_x;
fail:
    Py_XDECREF(pos);
    view_release(&v);
    return NULL;
}

/* ---- elementwise kernels, rounding, backends --------------------------------------------- */

PyDoc_STRVAR(elementwise_doc,
"elementwise($module, func, x, /, *, backend=None, torch_threads=None)\n"
"--\n\n"
"func(x) elementwise for func in 'exp', 'sin', 'cos' and a float32 ndarray x,\n"
"as the chosen backend computes it.  Returns a new C-contiguous array.\n");

static PyObject *py_elementwise(PyObject *self, PyObject *args, PyObject *kw)
{
    module_state *ms = state_of(self);
    static char *kwlist[] = { "", "", "backend", "torch_threads", NULL };
    const char *fname;
    PyObject *o_x, *o_be = NULL, *o_tt = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO|$OO:elementwise", kwlist, &fname, &o_x, &o_be,
                                     &o_tt))
        return NULL;
    int func = !strcmp(fname, "exp") ? 0 : !strcmp(fname, "sin") ? 1 : !strcmp(fname, "cos") ? 2 : -1;
    if (func < 0) {
        PyErr_Format(PyExc_ValueError, "func must be 'exp', 'sin' or 'cos', got %R",
                     PyTuple_GET_ITEM(args, 0));
        return NULL;
    }
    common_args a;
    if (parse_common(ms, NULL, NULL, o_be, o_tt, NULL, &a) < 0)
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
    const float *src = (const float *)PyArray_DATA(in);
    float *dst = (float *)PyArray_DATA((PyArrayObject *)out);
    size_t n = (size_t)PyArray_SIZE(in), piece = (size_t)SINPE_STEP_VALUES;
    if (a.opts.backend == SINPE_BACKEND_SLEEF) /* torch's vectors span the whole array */
        piece = n > 0 ? n : 1;
    int st = SINPE_OK;
    for (size_t i0 = 0; i0 < n && st == SINPE_OK; i0 += piece) {
        size_t m = n - i0 < piece ? n - i0 : piece;
        Py_BEGIN_ALLOW_THREADS
        st = sinpe_map(func, src + i0, dst + i0, m, &a.opts);
        Py_END_ALLOW_THREADS
        if (st == SINPE_OK && i0 + m < n && PyErr_CheckSignals() < 0)
            st = -1;
    }
    Py_DECREF(in);
    if (st != SINPE_OK) {
        Py_DECREF(out);
        if (st > 0) {
            call_ctx c = { "x", "n", NULL, NULL, a.backend_name };
            raise_status(st, &c);
        }
        return NULL;
    }
    return out;
}

PyDoc_STRVAR(round_doc,
"_round($module, x, dtype, /)\n"
"--\n\n"
"The float32 array x rounded to dtype (float16, bfloat16 or float64) as the\n"
"table and add_pe round it (for tests).\n");

static PyObject *py_round(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o_x, *o_dtype;
    if (!PyArg_ParseTuple(args, "OO:_round", &o_x, &o_dtype))
        return NULL;
    if (!PyArray_Check(o_x) || PyArray_TYPE((PyArrayObject *)o_x) != NPY_FLOAT32
        || PyArray_NDIM((PyArrayObject *)o_x) != 1) {
        PyErr_SetString(PyExc_TypeError, "x must be a 1-d float32 ndarray");
        return NULL;
    }
    PyArray_Descr *descr;
    sinpe_type t;
    if (get_dtype(o_dtype, &descr, &t) < 0)
        return NULL;
    PyArrayObject *in = (PyArrayObject *)PyArray_FROM_OTF(o_x, NPY_FLOAT32, NPY_ARRAY_IN_ARRAY);
    if (!in) {
        Py_DECREF(descr);
        return NULL;
    }
    npy_intp n = PyArray_SIZE(in);
    PyObject *out = PyArray_NewFromDescr(&PyArray_Type, descr, 1, &n, NULL, NULL, 0, NULL);
    if (!out) {
        Py_DECREF(in);
        return NULL;
    }
    sinpe_round((const float *)PyArray_DATA(in), PyArray_DATA((PyArrayObject *)out), (int64_t)n, t);
    Py_DECREF(in);
    return out;
}

/* ---- presets: frequency vectors and preset tables (sinpe/presets.py) -------------------- */

PyDoc_STRVAR(freqs_doc,
"_freqs($module, kind, n, /, *, start=0, step=1, group=1, a=0.0, b=1.0, m=1.0, base=1.0,\n"
"       recip=False, pow_lanes=0, backend=None, torch_threads=None)\n"
"--\n\n"
"A preset's frequency vector (sinpe_core.h, sinpe_freqs): kind 'exp_mul', 'exp_muldiv',\n"
"'pow' (float32; a, b, m and base rounded to float32 first, as torch rounds Python\n"
"scalars) or 'pow64' (float64).  pow_lanes: torch's float32 vector width for pow.\n");

static PyObject *py_freqs(PyObject *self, PyObject *args, PyObject *kw)
{
    module_state *ms = state_of(self);
    static char *kwlist[] = { "", "", "start", "step", "group", "a", "b", "m", "base", "recip",
                              "pow_lanes", "backend", "torch_threads", NULL };
    const char *kname;
    long long n, start = 0, step = 1, group = 1;
    double a = 0.0, b = 1.0, m = 1.0, base = 1.0;
    int recip = 0, lanes = 0;
    PyObject *o_be = NULL, *o_tt = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sL|$LLLddddpiOO:_freqs", kwlist, &kname, &n,
                                     &start, &step, &group, &a, &b, &m, &base, &recip, &lanes,
                                     &o_be, &o_tt))
        return NULL;
    static const char *kinds[SINPE_FREQ_COUNT] = { "exp_mul", "exp_muldiv", "pow", "pow64" };
    int k = -1;
    for (int i = 0; i < SINPE_FREQ_COUNT; i++)
        if (!strcmp(kname, kinds[i]))
            k = i;
    if (k < 0 || n < 0 || group < 1 || lanes < 0) {
        PyErr_Format(PyExc_ValueError, "_freqs: bad kind %s, n %lld, group %lld or pow_lanes %d",
                     kname, n, group, lanes);
        return NULL;
    }
    common_args c;
    if (parse_common(ms, NULL, NULL, o_be, o_tt, NULL, &c) < 0)
        return NULL;
    sinpe_freq f = { (sinpe_freq_kind)k, start, step, group, (float)a, (float)b, (float)m,
                     (float)base, b, base, recip, lanes };
    npy_intp dims[1] = { (npy_intp)n };
    PyObject *out = PyArray_SimpleNew(1, dims, k == SINPE_FREQ_POW64 ? NPY_DOUBLE : NPY_FLOAT);
    if (!out)
        return NULL;
    int st = sinpe_freqs(&f, PyArray_DATA((PyArrayObject *)out), (int64_t)n, &c.opts);
    if (st != SINPE_OK) {
        Py_DECREF(out);
        call_ctx ctx = { "freqs", "n", NULL, NULL, c.backend_name };
        raise_status(st, &ctx);
        return NULL;
    }
    return out;
}

PyDoc_STRVAR(preset_table_doc,
"_preset_table($module, rows, freq, col, /, *, comp=None, scale=None, zero_row=-1,\n"
"              trow_shift=0, f64_div=False, offset=0, table_rows=0, dtype=None, out=None,\n"
"              backend=None, torch_threads=None, threads=None)\n"
"--\n\n"
"A preset table (sinpe_core.h, sinpe_spec): rows (an int: positions offset .. offset+rows-1)\n"
"or an array of positions (with a trailing axis of 2 when comp names component 1);\n"
"freq: float32 (or float64) frequencies, one per angle; col: int64, 4 * angle + kind\n"
"(0 sin, 1 cos, 2 angle, 3 zero) per column.  The result has shape rows + (len(col),).\n");

static PyObject *py_preset_table(PyObject *self, PyObject *args, PyObject *kw)
{
    module_state *ms = state_of(self);
    static char *kwlist[] = { "", "", "", "comp", "scale", "zero_row", "trow_shift", "f64_div",
                              "offset", "table_rows", "dtype", "out", "backend", "torch_threads",
                              "threads", NULL };
    PyObject *o_rows, *o_freq, *o_col, *o_comp = Py_None, *o_scale = Py_None, *o_off = NULL;
    PyObject *o_dtype = Py_None, *o_out = Py_None, *o_be = NULL, *o_tt = NULL, *o_thr = NULL;
    long long zero_row = -1, trow_shift = 0, table_rows = 0;
    int f64_div = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|$OOLLpOLOOOOO:_preset_table", kwlist, &o_rows,
                                     &o_freq, &o_col, &o_comp, &o_scale, &zero_row, &trow_shift,
                                     &f64_div, &o_off, &table_rows, &o_dtype, &o_out, &o_be, &o_tt,
                                     &o_thr))
        return NULL;
    table_call t;
    memset(&t, 0, sizeof t);
    sinpe_job *j = &t.job;
    sinpe_spec sp;
    memset(&sp, 0, sizeof sp);
    PyArrayObject *freq = NULL, *col = NULL, *comp = NULL;
    t.ctx.what = "out";
    t.ctx.rows_name = "rows";
    t.ctx.job = j;
    if (parse_common(ms, NULL, o_off, o_be, o_tt, o_thr, &t.args) < 0)
        goto fail;
    t.ctx.backend = t.args.backend_name;
    freq = (PyArrayObject *)PyArray_FROM_OF(o_freq, NPY_ARRAY_IN_ARRAY);
    col = (PyArrayObject *)PyArray_FROM_OTF(o_col, NPY_INT64, NPY_ARRAY_IN_ARRAY | NPY_ARRAY_FORCECAST);
    if (!freq || !col)
        goto fail;
    if (PyArray_NDIM(freq) != 1 || PyArray_NDIM(col) != 1
        || (PyArray_TYPE(freq) != NPY_FLOAT && PyArray_TYPE(freq) != NPY_DOUBLE)) {
        PyErr_SetString(PyExc_TypeError, "_preset_table: freq must be 1-d float32 or float64, "
                                         "col 1-d integers");
        goto fail;
    }
    sp.nang = PyArray_DIM(freq, 0);
    if (PyArray_TYPE(freq) == NPY_FLOAT)
        sp.freq = (const float *)PyArray_DATA(freq);
    else
        sp.freq64 = (const double *)PyArray_DATA(freq);
    sp.f64_div = f64_div;
    sp.col = (const int64_t *)PyArray_DATA(col);
    sp.ncomp = 1;
    if (o_comp != Py_None) {
        comp = (PyArrayObject *)PyArray_FROM_OTF(o_comp, NPY_INT32, NPY_ARRAY_IN_ARRAY | NPY_ARRAY_FORCECAST);
        if (!comp)
            goto fail;
        if (PyArray_NDIM(comp) != 1 || PyArray_DIM(comp, 0) != sp.nang) {
            PyErr_SetString(PyExc_ValueError, "_preset_table: comp must have one entry per angle");
            goto fail;
        }
        sp.comp = (const int32_t *)PyArray_DATA(comp);
        for (npy_intp i = 0; i < sp.nang; i++)
            if (sp.comp[i] > 0)
                sp.ncomp = 2;
    }
    if (o_scale != Py_None) {
        double v = PyFloat_AsDouble(o_scale);
        if (v == -1.0 && PyErr_Occurred())
            goto fail;
        sp.scaled = 1;
        sp.scale = (float)v;
    }
    sp.zero_row = zero_row;
    sp.trow_shift = trow_shift;
    j->spec = &sp;
    j->offset = t.args.offset;
    j->table_rows = table_rows;
    int64_t d = PyArray_DIM(col, 0);
    if (PyLong_Check(o_rows)) {
        int64_t rows;
        if (get_int64(o_rows, "rows", &rows) < 0)
            goto fail;
        j->ndim = 2;
        j->shape[0] = rows;
        j->shape[1] = d;
    } else {
        t.pos = positions_get(o_rows, &j->pos_type);
        if (!t.pos)
            goto fail;
        int pn = PyArray_NDIM(t.pos) - (sp.ncomp > 1);
        if (pn < 0 || pn + 1 > SINPE_MAX_DIMS
            || (sp.ncomp > 1 && PyArray_DIM(t.pos, pn) != sp.ncomp)) {
            PyErr_SetString(PyExc_ValueError, "_preset_table: positions need a last axis of 2 "
                                              "components");
            goto fail;
        }
        j->use_pos = 1;
        j->pos = PyArray_BYTES(t.pos);
        j->ndim = pn + 1;
        for (int i = 0; i < pn; i++) {
            j->shape[i] = PyArray_DIMS(t.pos)[i];
            j->pos_strides[i] = PyArray_STRIDES(t.pos)[i];
        }
        j->pos_comp_stride = sp.ncomp > 1 ? PyArray_STRIDES(t.pos)[pn] : 0;
        j->shape[pn] = d;
    }
    sinpe_type want = SINPE_F32;
    if ((o_dtype != Py_None || o_out == Py_None) && get_dtype(o_dtype, &t.descr, &want) < 0)
        goto fail;
    if (o_out != Py_None) {
        if (view_get(o_out, "out", &t.out) < 0)
            goto fail;
        t.have_out = 1;
        int same = t.out.ndim == j->ndim;
        for (int i = 0; same && i < j->ndim; i++)
            same = t.out.shape[i] == j->shape[i];
        if (!same || (t.descr && want != t.out.type)) {
            PyObject *got = shape_tuple(t.out.ndim, t.out.shape), *exp = shape_tuple(j->ndim, j->shape);
            if (got && exp)
                PyErr_Format(!same ? PyExc_ValueError : PyExc_TypeError,
                             !same ? "out has shape %R; expected %R"
                                   : "out (shape %R) has another dtype than dtype= asks for",
                             got, exp);
            Py_XDECREF(got);
            Py_XDECREF(exp);
            goto fail;
        }
        for (int i = 0; i < j->ndim; i++)
            j->strides[i] = t.out.strides[i];
        j->type = t.out.type;
        j->data = t.out.data;
    } else {
        j->type = want;
        int64_t s1 = sinpe_type_size(want), cap = (int64_t)1 << 60;
        for (int i = j->ndim - 1; i >= 0; i--) {
            j->strides[i] = s1;
            int64_t nn = j->shape[i] > 1 ? j->shape[i] : 1;
            s1 = s1 > cap / nn ? cap : s1 * nn;
        }
    }
    int st = sinpe_job_check(j, &t.args.opts);
    if (st != SINPE_OK) {
        raise_status(st, &t.ctx);
        goto fail;
    }
    int64_t new_bytes = 0;
    if (!t.have_out) {
        new_bytes = sinpe_type_size(j->type);
        for (int i = 0; i < j->ndim; i++)
            new_bytes *= j->shape[i];
    }
    if (check_memory(new_bytes, j, &t.args.opts) < 0 || (!t.have_out && table_allocate(&t) < 0)
        || run_job(j, &t.args.opts, &t.ctx) < 0)
        goto fail;
    table_call_clear(&t);
    Py_XDECREF(freq);
    Py_XDECREF(col);
    Py_XDECREF(comp);
    if (!t.result) {
        t.result = o_out;
        Py_INCREF(o_out);
    }
    return t.result;
fail:
    table_call_clear(&t);
    Py_XDECREF(t.result);
    Py_XDECREF(freq);
    Py_XDECREF(col);
    Py_XDECREF(comp);
    return NULL;
}

PyDoc_STRVAR(rope_doc,
"_rope($module, x, cos, sin, /, *, seq_axis, batch_axis=-1, pairs=False, threads=None)\n"
"--\n\n"
"Rotates x in place (sinpe_core.h, sinpe_rope) with float32 tables cos and sin of shape\n"
"(tables, x.shape[seq_axis], rot); returns x.\n");

static PyObject *py_rope(PyObject *self, PyObject *args, PyObject *kw)
{
    module_state *ms = state_of(self);
    static char *kwlist[] = { "", "", "", "seq_axis", "batch_axis", "pairs", "threads", NULL };
    PyObject *o_x, *o_cos, *o_sin, *o_thr = NULL;
    int seq_axis, batch_axis = -1, pairs = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|$iipO:_rope", kwlist, &o_x, &o_cos, &o_sin,
                                     &seq_axis, &batch_axis, &pairs, &o_thr))
        return NULL;
    int threads;
    if (get_threads(ms, o_thr, &threads) < 0)
        return NULL;
    PyArrayObject *c = (PyArrayObject *)PyArray_FROM_OTF(o_cos, NPY_FLOAT, NPY_ARRAY_IN_ARRAY);
    PyArrayObject *sn = c ? (PyArrayObject *)PyArray_FROM_OTF(o_sin, NPY_FLOAT, NPY_ARRAY_IN_ARRAY)
                          : NULL;
    if (!sn) {
        Py_XDECREF(c);
        return NULL;
    }
    view v;
    if (view_get(o_x, "x", &v) < 0) {
        Py_DECREF(c);
        Py_DECREF(sn);
        return NULL;
    }
    sinpe_rope r;
    memset(&r, 0, sizeof r);
    r.data = v.data;
    r.type = v.type;
    r.ndim = v.ndim;
    memcpy(r.shape, v.shape, sizeof v.shape);
    memcpy(r.strides, v.strides, sizeof v.strides);
    r.seq_axis = seq_axis;
    r.batch_axis = batch_axis;
    r.pairs = pairs;
    int ok = PyArray_NDIM(c) == 3 && PyArray_NDIM(sn) == 3 && v.ndim >= 2 && seq_axis >= 0
             && seq_axis < v.ndim - 1;
    for (int i = 0; ok && i < 3; i++)
        ok = PyArray_DIM(c, i) == PyArray_DIM(sn, i);
    if (ok) {
        r.tables = PyArray_DIM(c, 0);
        r.rot = PyArray_DIM(c, 2);
        ok = PyArray_DIM(c, 1) == v.shape[seq_axis];
    }
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "_rope: cos and sin must have shape "
                                          "(tables, x.shape[seq_axis], rot)");
        goto fail;
    }
    r.cos = (const float *)PyArray_DATA(c);
    r.sin = (const float *)PyArray_DATA(sn);
    int st = sinpe_rope_check(&r);
    if (st == SINPE_OK) {
        Py_BEGIN_ALLOW_THREADS
        st = sinpe_rope_run(&r, threads);
        Py_END_ALLOW_THREADS
    }
    if (st != SINPE_OK) {
        sinpe_job j;
        memset(&j, 0, sizeof j);
        j.ndim = v.ndim;
        memcpy(j.shape, v.shape, sizeof v.shape);
        call_ctx ctx = { "x", "seq_len", &j, NULL, NULL };
        if (st == SINPE_E_DMODEL)
            PyErr_Format(PyExc_ValueError, "the rotated part (%lld columns) must be even and "
                         "at most x.shape[-1] = %lld", (long long)r.rot,
                         (long long)v.shape[v.ndim - 1]);
        else
            raise_status(st, &ctx);
        goto fail;
    }
    view_release(&v);
    Py_DECREF(c);
    Py_DECREF(sn);
    Py_INCREF(o_x);
    return o_x;
fail:
    view_release(&v);
    Py_DECREF(c);
    Py_DECREF(sn);
    return NULL;
}

static int vml_lib(PyObject *o, sinpe_vml *lib)
{
    for (int i = 0; i < SINPE_VML_COUNT; i++)
        if (PyUnicode_Check(o) && PyUnicode_CompareWithASCIIString(o, VML_NAMES[i]) == 0) {
            *lib = (sinpe_vml)i;
            return 0;
        }
    PyErr_Format(PyExc_ValueError, "library must be 'mkl' or 'torch', got %R", o);
    return -1;
}

PyDoc_STRVAR(load_vml_doc,
"load_vml($module, library, path, /)\n"
"--\n\n"
"Load the oneMKL VML functions of library ('mkl': the mkl wheel's mkl_rt;\n"
"'torch': the installed torch's libtorch_cpu) from path, once per process.\n"
"Raises OSError with the reason on failure.\n");

static PyObject *py_load_vml(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o_lib, *bytes;
    sinpe_vml lib;
    if (!PyArg_ParseTuple(args, "OO&:load_vml", &o_lib, PyUnicode_FSConverter, &bytes))
        return NULL;
    if (vml_lib(o_lib, &lib) < 0) {
        Py_DECREF(bytes);
        return NULL;
    }
    char msg[512];
    int st;
    const char *path = PyBytes_AS_STRING(bytes);
    Py_BEGIN_ALLOW_THREADS
    st = sinpe_vml_load(lib, path, msg, sizeof msg);
    Py_END_ALLOW_THREADS
    Py_DECREF(bytes);
    if (st != SINPE_OK) {
        PyErr_Format(PyExc_OSError, "cannot load oneMKL from %s: %s", VML_NAMES[lib], msg);
        return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(vml_info_doc,
"vml_info($module, library, /)\n"
"--\n\n"
"None when the library ('mkl' or 'torch') is not loaded, else a dict with\n"
"oneMKL's version string and the threading layer mkl_rt reported (1 =\n"
"sequential; -1 for torch's library).\n");

static PyObject *py_vml_info(PyObject *self, PyObject *arg)
{
    (void)self;
    sinpe_vml lib;
    if (vml_lib(arg, &lib) < 0)
        return NULL;
    if (!sinpe_vml_loaded(lib))
        Py_RETURN_NONE;
    return Py_BuildValue("{s:s,s:i}", "version", sinpe_vml_version(lib), "threading_layer",
                         sinpe_vml_threading_layer(lib));
}

PyDoc_STRVAR(set_resolver_doc,
"_set_resolver($module, resolve, /)\n"
"--\n\n"
"resolve(name) -> concrete backend name: called for 'auto', 'sleef' and names\n"
"whose library is not loaded yet (the package's sinpe._choice.resolve).\n");

static PyObject *py_set_resolver(PyObject *self, PyObject *arg)
{
    module_state *ms = state_of(self);
    if (!PyCallable_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "resolve must be callable");
        return NULL;
    }
    Py_INCREF(arg);
    Py_XSETREF(ms->resolver, arg);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(set_backend_doc,
"set_backend($module, name, /)\n"
"--\n\n"
"Set the default backend: 'auto' (chosen at each call: torch's own kernels when\n"
"torch is imported, ...: see the README), or a backend name to pin it.  Raises\n"
"if that backend is unavailable.\n");

static PyObject *py_set_backend(PyObject *self, PyObject *arg)
{
    module_state *ms = state_of(self);
    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "backend must be a backend name (str), got %R (%s)", arg,
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    if (get_backend(ms, arg, NULL, NULL, NULL) < 0)
        return NULL;
    Py_INCREF(arg);
    Py_SETREF(ms->backend, arg);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(get_backend_doc,
"get_backend($module, /)\n"
"--\n\n"
"The backend a call without backend= uses now (the default, resolved).\n");

static PyObject *py_get_backend(PyObject *self, PyObject *unused)
{
    (void)unused;
    const char *name;
    if (get_backend(state_of(self), NULL, NULL, NULL, &name) < 0)
        return NULL;
    return PyUnicode_FromString(name);
}

PyDoc_STRVAR(get_default_doc,
"_get_default($module, /)\n"
"--\n\n"
"The default as set: 'auto' or a backend name.\n");

static PyObject *py_get_default(PyObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *b = state_of(self)->backend;
    Py_INCREF(b);
    return b;
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

PyDoc_STRVAR(cpu_features_doc,
"cpu_features($module, /)\n"
"--\n\n"
"What the CPU probe found: vendor and the vector features sinpe can use (x86\n"
"flags count only when the OS saves their registers).\n");

static PyObject *py_cpu_features(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    const sinpe_cpu_info *c = sinpe_cpu();
#define B(v) ((v) ? Py_True : Py_False)
    return Py_BuildValue("{s:s,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O}", "vendor", c->vendor, "fma",
                         B(c->fma), "avx2", B(c->avx2), "avx512f", B(c->avx512f), "avx512dq",
                         B(c->avx512dq), "avx512bw", B(c->avx512bw), "avx512vl", B(c->avx512vl),
                         "f16c", B(c->f16c), "neon", B(c->neon));
#undef B
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
    for (int k = 0; l && k < SINPE_PATH_COUNT; k++) {
        if (!sinpe_path_available((sinpe_path)k))
            continue;
        PyObject *n = PyUnicode_FromString(sinpe_path_name((sinpe_path)k));
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
"and FMA), 'avx512' (x86-64 with AVX-512F) or 'neon' (AArch64).  Every path gives\n"
"the same bits.\n");

static PyObject *py_set_kernel(PyObject *self, PyObject *arg)
{
    module_state *ms = state_of(self);
    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "kernel must be 'scalar', 'avx2', 'avx512' or 'neon', got %R (%s)",
                     arg, Py_TYPE(arg)->tp_name);
        return NULL;
    }
    for (int k = 0; k < SINPE_PATH_COUNT; k++) {
        if (PyUnicode_CompareWithASCIIString(arg, sinpe_path_name((sinpe_path)k)) == 0) {
            if (!sinpe_path_available((sinpe_path)k)) {
                PyErr_Format(PyExc_RuntimeError,
                             "kernel %R is not available: this build or CPU lacks it", arg);
                return NULL;
            }
            ms->path = (sinpe_path)k;
            Py_RETURN_NONE;
        }
    }
    PyErr_Format(PyExc_ValueError, "unknown kernel %R: choose 'scalar', 'avx2', 'avx512' or 'neon'", arg);
    return NULL;
}

PyDoc_STRVAR(get_kernel_doc,
"get_kernel($module, /)\n"
"--\n\n"
"The built-in backend's code path in use.\n");

static PyObject *py_get_kernel(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyUnicode_FromString(sinpe_path_name(state_of(self)->path));
}

static PyMethodDef methods[] = {
    { "set_threads", py_set_threads, METH_O, set_threads_doc },
    { "get_threads", py_get_threads, METH_NOARGS, get_threads_doc },
    { "kernels", py_kernels, METH_NOARGS, kernels_doc },
    { "cpu_features", py_cpu_features, METH_NOARGS, cpu_features_doc },
    { "set_kernel", py_set_kernel, METH_O, set_kernel_doc },
    { "get_kernel", py_get_kernel, METH_NOARGS, get_kernel_doc },
    { "positional_encoding", (PyCFunction)(void (*)(void))py_positional_encoding,
      METH_VARARGS | METH_KEYWORDS, pe_doc },
    { "empty_table", (PyCFunction)(void (*)(void))py_empty_table, METH_VARARGS | METH_KEYWORDS,
      empty_table_doc },
    { "add_pe", (PyCFunction)(void (*)(void))py_add_pe, METH_VARARGS | METH_KEYWORDS, add_doc },
    { "elementwise", (PyCFunction)(void (*)(void))py_elementwise, METH_VARARGS | METH_KEYWORDS,
      elementwise_doc },
    { "_round", py_round, METH_VARARGS, round_doc },
    { "_freqs", (PyCFunction)(void (*)(void))py_freqs, METH_VARARGS | METH_KEYWORDS, freqs_doc },
    { "_preset_table", (PyCFunction)(void (*)(void))py_preset_table, METH_VARARGS | METH_KEYWORDS,
      preset_table_doc },
    { "_rope", (PyCFunction)(void (*)(void))py_rope, METH_VARARGS | METH_KEYWORDS, rope_doc },
    { "load_vml", py_load_vml, METH_VARARGS, load_vml_doc },
    { "vml_info", py_vml_info, METH_O, vml_info_doc },
    { "_set_resolver", py_set_resolver, METH_O, set_resolver_doc },
    { "set_backend", py_set_backend, METH_O, set_backend_doc },
    { "get_backend", py_get_backend, METH_NOARGS, get_backend_doc },
    { "_get_default", py_get_default, METH_NOARGS, get_default_doc },
    { NULL, NULL, 0, NULL },
};

static int module_traverse(PyObject *m, visitproc visit, void *arg)
{
    module_state *ms = state_of(m);
    Py_VISIT(ms->backend);
    Py_VISIT(ms->resolver);
    return 0;
}

static int module_clear(PyObject *m)
{
    module_state *ms = state_of(m);
    Py_CLEAR(ms->backend);
    Py_CLEAR(ms->resolver);
    return 0;
}

static void module_free(void *m)
{
    module_clear((PyObject *)m);
}

static int module_exec(PyObject *m)
{
    import_array1(-1);
    module_state *ms = state_of(m);
    ms->backend = PyUnicode_FromString("builtin"); /* until the package sets its default */
    if (!ms->backend)
        return -1;
    ms->resolver = NULL;
    ms->path = sinpe_path_best(); /* CPU probe, once per process */
    ms->threads = 1;
    return 0;
}

static PyModuleDef_Slot slots[] = {
    { Py_mod_exec, (void *)module_exec },
    { 0, NULL },
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_sinpe", "C core binding of sinpe.", sizeof(module_state), methods,
    slots, module_traverse, module_clear, module_free,
};

PyMODINIT_FUNC PyInit__sinpe(void)
{
    return PyModuleDef_Init(&moduledef);
}
