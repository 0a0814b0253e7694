/* Converters: Python objects to the core's values (binding/binding.h).  They name the
 * parameter when an object cannot be converted; every rule on values is the core's. */
#include "binding/binding.h"

#include <limits.h>
#include <string.h>

#define TYPE_NAMES SINPE_TYPE_NAMES

/* ---- scalars and options ---------------------------------------------------------------- */

static int is_bool(PyObject *o)
{
    return PyBool_Check(o) || PyArray_IsScalar(o, Bool)
           || (PyArray_Check(o) && PyArray_TYPE((PyArrayObject *)o) == NPY_BOOL);
}

int to_int64(PyObject *o, const char *name, int64_t *v)
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

int to_real(PyObject *o, const char *name, double *v)
{
    int real = !is_bool(o) && !PyComplex_Check(o) && !PyArray_IsScalar(o, ComplexFloating)
               && !PyUnicode_Check(o) && !PyBytes_Check(o)
               && (PyFloat_Check(o) || PyLong_Check(o) || PyArray_IsScalar(o, Number)
                   || (Py_TYPE(o)->tp_as_number && Py_TYPE(o)->tp_as_number->nb_float));
    if (!real) {
        PyErr_Format(PyExc_TypeError, "%s must be a real number, got %R (%s)", name, o,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    double b = PyFloat_AsDouble(o);
    if (b == -1.0 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_OverflowError, "%s=%R is too large for a float64", name, o);
        } else if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s must be a real number, got %R (%s)", name, o,
                         Py_TYPE(o)->tp_name);
        }
        return -1;
    }
    *v = b;
    return 0;
}

int to_scale(PyObject *o, const char *name, int *on, float *v)
{
    double d;
    if (o == Py_None)
        return 0;
    if (to_real(o, name, &d) < 0)
        return -1;
    *on = 1;
    *v = (float)d;
    return 0;
}

static int clamp_int(int64_t v)
{
    return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int)v;
}

/* opts: (backend, path, threads, trig, lanes, torch_threads, pow_lanes), as the package
 * resolves them; threads and torch_threads as the caller gave them (named in messages). */
int to_opts(PyObject *t, call *c)
{
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 7) {
        PyErr_SetString(PyExc_TypeError, "opts must be a 7-tuple");
        return -1;
    }
    int64_t v[7];
    static const char *names[7] = { "backend", "path", "threads", "trig", "lanes",
                                    "torch_threads", "pow_lanes" };
    for (int i = 0; i < 7; i++)
        if (to_int64(PyTuple_GET_ITEM(t, i), names[i], &v[i]) < 0)
            return -1;
    sinpe_opts *o = &c->opts;
    o->backend = clamp_int(v[0]);
    o->path = clamp_int(v[1]);
    o->threads = clamp_int(v[2]);
    o->sleef.trig = clamp_int(v[3]);
    o->sleef.lanes = clamp_int(v[4]);
    o->sleef.torch_threads = clamp_int(v[5]);
    o->pow_lanes = clamp_int(v[6]);
    c->threads = (long long)v[2];
    c->torch_threads = (long long)v[5];
    return 0;
}

/* ---- arrays and buffers ---------------------------------------------------------------- */

/* The element type of a NumPy dtype: 0 and *t for the types the core knows, 1 for one in
 * non-native byte order, -1 for anything else. */
int type_of(PyArray_Descr *d, sinpe_type *t)
{
    int n = d->type_num, size = (int)PyDataType_ELSIZE(d);
    const char *name = d->typeobj ? d->typeobj->tp_name : "";
    const char *dot = strrchr(name, '.');
    if (n >= NPY_USERDEF && size == 2 && !strcmp(dot ? dot + 1 : name, "bfloat16")) {
        *t = SINPE_BF16;
        return 0;
    }
    if (n == NPY_FLOAT || n == NPY_DOUBLE || n == NPY_HALF)
        *t = n == NPY_FLOAT ? SINPE_F32 : n == NPY_DOUBLE ? SINPE_F64 : SINPE_F16;
    else if (PyTypeNum_ISINTEGER(n) && !PyTypeNum_ISBOOL(n) && (size == 1 || size == 2 || size == 4 || size == 8))
        *t = (sinpe_type)((PyTypeNum_ISSIGNED(n) ? SINPE_I8 : SINPE_U8)
                          + (size == 1 ? 0 : size == 2 ? 1 : size == 4 ? 2 : 3));
    else
        return -1;
    return PyArray_ISNBO(d->byteorder) ? 0 : 1;
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
    PyErr_Format(PyExc_TypeError, "%s must be a writable array of float32, float16, bfloat16 or "
                 "float64 (a NumPy array, a torch CPU tensor, an object with the buffer protocol "
                 "or DLPack), got %s", what, Py_TYPE(o)->tp_name);
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

int ndarray_view(PyArrayObject *a, const char *what, sinpe_array *v)
{
    PyArray_Descr *d = PyArray_DESCR(a);
    int k = type_of(d, &v->type);
    if (k != 0) {
        PyObject *s = PyObject_Str((PyObject *)d);
        const char *txt = s ? PyUnicode_AsUTF8(s) : NULL;
        if (txt)
            wrong_type(what, k > 0 ? TYPE_NAMES[v->type] : txt, k > 0);
        Py_XDECREF(s);
        return -1;
    }
    if (PyArray_NDIM(a) > SINPE_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s has too many dimensions", what);
        return -1;
    }
    v->readonly = !PyArray_ISWRITEABLE(a);
    v->data = PyArray_BYTES(a);
    v->ndim = PyArray_NDIM(a);
    for (int i = 0; i < v->ndim; i++) {
        v->shape[i] = PyArray_DIMS(a)[i];
        v->strides[i] = PyArray_STRIDES(a)[i];
    }
    return 0;
}

/* ---- DLPack (torch tensors and any other exporter) ------------------------------------- */

/* The DLPack ABI (dlpack.h, v1.0), the parts read here: a producer's __dlpack__ returns a
 * capsule named "dltensor_versioned" (or "dltensor" before v1.0) holding one of these.
 * The capsule stays owned by the call: its destructor returns the tensor to the producer. */
typedef struct { int32_t device_type, device_id; } dl_device;
typedef struct { uint8_t code, bits; uint16_t lanes; } dl_dtype;
typedef struct {
    void *data;
    dl_device device;
    int32_t ndim;
    dl_dtype dtype;
    int64_t *shape, *strides; /* strides in elements; NULL: C-contiguous */
    uint64_t byte_offset;
} dl_tensor;
typedef struct {
    dl_tensor t;
    void *manager_ctx;
    void (*deleter)(void *self);
} dl_managed;
typedef struct {
    uint32_t major, minor;
    void *manager_ctx;
    void (*deleter)(void *self);
    uint64_t flags;
    dl_tensor t;
} dl_managed_v1;

enum { DL_CPU = 1, DL_FLOAT = 2, DL_BFLOAT = 4, DL_COMPLEX = 5, DL_READ_ONLY = 1,
       DL_IS_COPIED = 2 };

/* The exporter's capsule, asked for version 1.0 and no copy; an exporter that predates
 * those keywords is asked plainly. */
static PyObject *dlpack_capsule(PyObject *o, const char *what)
{
    PyObject *meth = PyObject_GetAttrString(o, "__dlpack__");
    if (!meth)
        return NULL;
    PyObject *args = PyTuple_New(0), *kw = Py_BuildValue("{s:(ii),s:O}", "max_version", 1, 0,
                                                         "copy", Py_False);
    PyObject *cap = args && kw ? PyObject_Call(meth, args, kw) : NULL;
    if (!cap && PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        cap = PyObject_CallNoArgs(meth);
    }
    Py_XDECREF(args);
    Py_XDECREF(kw);
    Py_DECREF(meth);
    if (!cap && PyErr_ExceptionMatches(PyExc_BufferError)) { /* torch: requires grad, ... */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_Format(PyExc_ValueError, "%s (a %s) cannot be written in place: %S", what,
                     Py_TYPE(o)->tp_name, value ? value : Py_None);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
    }
    return cap;
}

static int dlpack_type(const dl_dtype *d, sinpe_type *t)
{
    if (d->lanes != 1)
        return -1;
    if (d->code == DL_BFLOAT && d->bits == 16)
        *t = SINPE_BF16;
    else if (d->code == DL_FLOAT && (d->bits == 16 || d->bits == 32 || d->bits == 64))
        *t = d->bits == 32 ? SINPE_F32 : d->bits == 64 ? SINPE_F64 : SINPE_F16;
    else
        return -1;
    return 0;
}

/* 1 when o says its values are its memory's negated (torch's neg bit: torch._neg_view,
 * complex .conj().imag): torch exports such a view's memory as it is, so a write or a read
 * through the export would see the values' negatives.  0 when not, -1 with an error set. */
static int negated_view(PyObject *o, const char *what)
{
    static PyObject *is_neg;
    if (!is_neg && !(is_neg = PyUnicode_InternFromString("is_neg")))
        return -1;
    PyObject *m = PyObject_GetAttr(o, is_neg); /* (one lookup, an interned name) */
    if (!m && PyErr_ExceptionMatches(PyExc_AttributeError))
        PyErr_Clear();
    PyObject *r = m ? PyObject_CallNoArgs(m) : NULL;
    Py_XDECREF(m);
    int neg = r ? PyObject_IsTrue(r) : -1;
    Py_XDECREF(r);
    if (neg < 0 && PyErr_Occurred()) {
        /* an exporter whose method fails has no such bit; KeyboardInterrupt, MemoryError and
         * the like are the caller's */
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            return -1;
        PyErr_Clear();
    }
    if (neg <= 0)
        return 0;
    PyErr_Format(PyExc_ValueError, "%s is a negative view (torch's neg bit, as .conj().imag "
                 "makes): its memory holds the values negated (%s.resolve_neg() is a copy that "
                 "holds them)", what, what);
    return -1;
}

/* A torch tensor's capsule by torch's C-level export (the route the package handed, a few
 * hundred nanoseconds where torch.Tensor.__dlpack__'s Python code takes microseconds), for a
 * tensor of exactly torch.Tensor (a subclass may define its own export) that does not require
 * grad; NULL without an error set: take __dlpack__, whose refusals and messages are the rules
 * (grad, other layouts and devices: torch raises; a complex tensor, which may carry the
 * conjugate bit, is left to it as well).  The neg bit is checked by the caller either way. */
static PyObject *route_capsule(const tensor_route *r, PyObject *o)
{
    if (!r || !r->tensor_type || (PyObject *)Py_TYPE(o) != r->tensor_type)
        return NULL;
    static PyObject *requires_grad;
    if (!requires_grad && !(requires_grad = PyUnicode_InternFromString("requires_grad")))
        return NULL;
    PyObject *g = PyObject_GetAttr(o, requires_grad);
    int grad = g ? PyObject_IsTrue(g) : -1;
    Py_XDECREF(g);
    PyObject *cap = grad == 0 ? PyObject_CallOneArg(r->to_dlpack, o) : NULL;
    if (!cap || !PyCapsule_IsValid(cap, "dltensor_versioned")
        || ((const dl_managed_v1 *)PyCapsule_GetPointer(cap, "dltensor_versioned"))->t.dtype.code
               == DL_COMPLEX) {
        Py_XDECREF(cap);
        if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_Exception))
            PyErr_Clear(); /* __dlpack__ says what is wrong; KeyboardInterrupt is the caller's */
        return NULL;
    }
    return cap;
}

/* The module's route (its state): set by the package, cleared with the module. */
const char tensor_route_doc[] =
"tensor_route($module, tensor_type, to_dlpack, bump, /)\n"
"--\n\n"
"Export a tensor of exactly type tensor_type (torch.Tensor) by to_dlpack(t) (torch's C-level\n"
"torch._C._to_dlpack_versioned) instead of its Python-level __dlpack__; every refusal is\n"
"kept (a tensor that requires grad, a conjugate or negative view, another device or layout\n"
"takes the __dlpack__ route and its message).  bump (torch._C._increment_version, or None):\n"
"called with (t,) by the held add right after it wrote such a tensor, with the GIL held, so\n"
"no signal's handler runs between the write and the version's move.  A tensor_type (or a\n"
"subclass) whose elements reach past its storage's end (its untyped_storage().nbytes() and\n"
"storage_offset()) is refused, whichever route exports it.  None, None, None: no route.\n";

PyObject *py_tensor_route(PyObject *self, PyObject *args)
{
    PyObject *type, *fn, *bump;
    if (!PyArg_ParseTuple(args, "OOO:tensor_route", &type, &fn, &bump))
        return NULL;
    if ((type == Py_None) != (fn == Py_None) || (type != Py_None && !PyType_Check(type))
        || (fn != Py_None && !PyCallable_Check(fn))
        || (bump != Py_None && (type == Py_None || !PyCallable_Check(bump)))) {
        PyErr_SetString(PyExc_TypeError, "tensor_route() takes a type, a callable and a "
                        "callable or None, or None, None, None");
        return NULL;
    }
    module_clear(self);
    tensor_route *r = PyModule_GetState(self);
    if (type != Py_None) {
        Py_INCREF(type);
        Py_INCREF(fn);
        r->tensor_type = type;
        r->to_dlpack = fn;
        if (bump != Py_None) {
            Py_INCREF(bump);
            r->bump = bump;
        }
    }
    Py_RETURN_NONE;
}

/* The route's references, listed once: DO(each) for traverse and clear. */
#define ROUTE_REFS(DO, r)                                                                    \
    do {                                                                                     \
        DO((r)->tensor_type);                                                                \
        DO((r)->to_dlpack);                                                                  \
        DO((r)->bump);                                                                       \
    } while (0)

int module_traverse(PyObject *m, visitproc visit, void *arg)
{
    tensor_route *r = PyModule_GetState(m);
    ROUTE_REFS(Py_VISIT, r);
    return 0;
}

int module_clear(PyObject *m)
{
    tensor_route *r = PyModule_GetState(m);
    ROUTE_REFS(Py_CLEAR, r);
    return 0;
}

void module_free(void *m)
{
    module_clear(m);
}

/* The bytes v's shape and strides reach from its first element (0 when it is empty;
 * INT64_MAX past int64). */
static int64_t reach(const sinpe_array *v)
{
    int64_t hi = sinpe_type_size(v->type);
    for (int i = 0; i < v->ndim; i++)
        if (v->shape[i] == 0)
            return 0;
    for (int i = 0; i < v->ndim; i++) {
        int64_t n = v->shape[i] - 1, s = v->strides[i];
        if (s <= 0 || n == 0)
            continue;
        if (n > (INT64_MAX - hi) / s)
            return INT64_MAX;
        hi += n * s;
    }
    return hi;
}

/* A long from o.name(): an argument's own method. */
static long long call_long(PyObject *o, PyObject *name)
{
    PyObject *n = PyObject_CallMethodNoArgs(o, name);
    long long v = n ? PyLong_AsLongLong(n) : -1;
    Py_XDECREF(n);
    return v;
}

/* A torch tensor's elements within its storage (untyped_storage().nbytes(), storage_offset()):
 * a storage resized smaller under the view would have the core read or write past its end,
 * where torch's own ops raise; the tensor's own errors (a subclass's) propagate. */
static int storage_holds(const tensor_route *r, PyObject *o, const char *what,
                         const sinpe_array *v)
{
    static PyObject *names[3];
    static const char *const id[3] = { "untyped_storage", "nbytes", "storage_offset" };
    int is = r && r->tensor_type && v->data ? PyObject_IsInstance(o, r->tensor_type) : 0;
    for (int i = 0; is > 0 && i < 3; i++)
        if (!names[i] && !(names[i] = PyUnicode_InternFromString(id[i])))
            return -1;
    if (is <= 0)
        return is;
    PyObject *st = PyObject_CallMethodNoArgs(o, names[0]);
    long long nbytes = st ? call_long(st, names[1]) : -1;
    Py_XDECREF(st);
    long long off = PyErr_Occurred() ? -1 : call_long(o, names[2]);
    if (PyErr_Occurred())
        return -1;
    int64_t size = sinpe_type_size(v->type), need = reach(v);
    long long room = nbytes < 0 || off < 0 || off > nbytes / size ? -1 : nbytes - off * size;
    if (need <= room)
        return 0;
    PyErr_Format(PyExc_ValueError, "%s's elements reach byte %lld past its first element, where "
                 "its storage holds %lld bytes from there (the storage was resized under the "
                 "tensor): sinpe does not touch memory past a storage's end", what,
                 (long long)need, room);
    return -1;
}

/* A DLPack exporter's tensor as the core sees it, in place: CPU memory only, the element
 * types the core writes; a read-only export or a copy the producer made is refused (a write
 * into it would not reach the tensor). */
static int dlpack_view(call *c, PyObject *o, const char *what, sinpe_array *v)
{
    if (negated_view(o, what) < 0)
        return -1;
    PyObject *cap = route_capsule(c->route, o);
    if (!cap && PyErr_Occurred())
        return -1;
    cap = own(c, cap ? cap : dlpack_capsule(o, what));
    if (!cap)
        return -1;
    const dl_tensor *t;
    uint64_t flags = 0;
    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        const dl_managed_v1 *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
        if (m->major != 1) {
            PyErr_Format(PyExc_TypeError, "%s: DLPack version %u.%u is not read (1.x is)", what,
                         m->major, m->minor);
            return -1;
        }
        t = &m->t;
        flags = m->flags;
    } else if (PyCapsule_IsValid(cap, "dltensor")) {
        t = &((const dl_managed *)PyCapsule_GetPointer(cap, "dltensor"))->t;
    } else {
        PyErr_Format(PyExc_TypeError, "%s.__dlpack__() did not return a DLPack capsule", what);
        return -1;
    }
    if (t->device.device_type != DL_CPU) {
        PyErr_Format(PyExc_ValueError, "%s is on a device other than the CPU (DLPack device type "
                     "%d): sinpe writes CPU memory only", what, (int)t->device.device_type);
        return -1;
    }
    if (dlpack_type(&t->dtype, &v->type) < 0) {
        static const char *codes[] = { "int", "uint", "float", "handle", "bfloat", "complex",
                                       "bool" };
        const char *name = t->dtype.code < 7 ? codes[t->dtype.code] : "type code ";
        PyErr_Format(PyExc_TypeError, "%s must have dtype float32, float16, bfloat16 or float64, "
                     "got %s%d%s", what, name, (int)t->dtype.bits,
                     t->dtype.lanes != 1 ? " vectors" : "");
        return -1;
    }
    if (flags & DL_IS_COPIED) {
        PyErr_Format(PyExc_ValueError, "%s's DLPack export is a copy: a write into it would not "
                     "reach %s", what, Py_TYPE(o)->tp_name);
        return -1;
    }
    if (t->ndim < 0 || t->ndim > SINPE_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s has too many dimensions", what);
        return -1;
    }
    int64_t size = sinpe_type_size(v->type), stride = size;
    v->readonly = (flags & DL_READ_ONLY) != 0;
    /* an empty tensor may be exported with no data (torch: NULL): no offset is applied to it */
    v->data = t->data ? (char *)t->data + t->byte_offset : NULL;
    v->ndim = t->ndim;
    for (int i = t->ndim - 1; i >= 0; i--) {
        int64_t n = t->shape[i], s = t->strides ? t->strides[i] : stride;
        if (n < 0 || s > INT64_MAX / size || s < -(INT64_MAX / size)
            || (n > 0 && stride > INT64_MAX / n)) {
            PyErr_Format(PyExc_ValueError, "%s: its DLPack shape or strides pass int64", what);
            return -1;
        }
        v->shape[i] = n;
        v->strides[i] = t->strides ? s * size : s;
        stride *= n > 0 ? n : 1;
    }
    return storage_holds(c->route, o, what, v);
}

/* An array, any exporter of the buffer protocol or of DLPack (a torch tensor), as the core
 * sees it (NULL strides mean C-contiguous, NULL shape one axis; indirect buffers cannot be
 * seen).  Nothing is copied; the buffer (slot) or the DLPack capsule stays held until the
 * call is cleared. */
int view_get(call *c, int slot, PyObject *o, const char *what, sinpe_array *v)
{
    memset(v, 0, sizeof *v);
    if (PyArray_Check(o))
        return ndarray_view((PyArrayObject *)o, what, v);
    Py_buffer *b = &c->buf[slot];
    if (c->route && c->route->tensor_type && (PyObject *)Py_TYPE(o) == c->route->tensor_type)
        return dlpack_view(c, o, what, v); /* torch.Tensor itself: no lookups by name */
    if (!PyObject_CheckBuffer(o) && PyObject_HasAttrString(o, "__dlpack__"))
        return dlpack_view(c, o, what, v);
    if (!PyObject_CheckBuffer(o) || PyObject_GetBuffer(o, b, PyBUF_RECORDS_RO) < 0) {
        PyErr_Clear();
        return not_an_array(o, what);
    }
    c->have_buf[slot] = 1;
    int swapped;
    const char *name = format_name(b->format, &swapped);
    int fmt_ok = !swapped && b->format && (!strcmp(name, "float32") || !strcmp(name, "float64")
                                            || !strcmp(name, "float16"));
    if (!fmt_ok || b->itemsize != (name[5] == '3' ? 4 : name[5] == '6' ? 8 : 2))
        return wrong_type(what, name, swapped);
    if (b->suboffsets) {
        PyErr_Format(PyExc_ValueError, "%s is an indirect buffer (suboffsets), which sinpe does "
                     "not write", what);
        return -1;
    }
    if (b->ndim > SINPE_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s has too many dimensions", what);
        return -1;
    }
    v->type = name[5] == '3' ? SINPE_F32 : name[5] == '6' ? SINPE_F64 : SINPE_F16;
    v->readonly = b->readonly;
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
}

/* A float32 C-order array of anything array-like (owned by the call), seen as v. */
int float_array(call *c, PyObject *o, const char *what, sinpe_array *v)
{
    PyObject *a = own(c, PyArray_FROM_OTF(o, NPY_FLOAT, NPY_ARRAY_IN_ARRAY));
    if (!a)
        return -1;
    if (ndarray_view((PyArrayObject *)a, what, v) < 0)
        return -1;
    v->readonly = 0;
    return 0;
}

/* An object array's elements: an int beyond int64/uint64 is an OverflowError (as
 * torch.tensor says), anything but a real number a TypeError; reals with a float among
 * them become float64. */
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

/* positions= as an array the core reads in place (owned by the call): integers of 1 to 8
 * bytes, float16/32/64 and bfloat16 as they are; other real types (longdouble, other byte
 * orders) converted to float32 by NumPy first. */
int positions_get(call *c, PyObject *o, sinpe_array *v)
{
    PyArrayObject *a = (PyArrayObject *)PyArray_FROM_O(o);
    if (!a)
        return -1;
    if (PyArray_TYPE(a) == NPY_OBJECT) {
        PyArrayObject *b = positions_from_objects(a);
        Py_DECREF(a);
        if (!b)
            return -1;
        a = b;
    }
    sinpe_type t;
    int n = PyArray_TYPE(a);
    if (!(PyTypeNum_ISINTEGER(n) || PyTypeNum_ISFLOAT(n) || type_of(PyArray_DESCR(a), &t) == 0)
        || PyTypeNum_ISBOOL(n)) {
        PyErr_Format(PyExc_TypeError, "positions must be integers or real numbers, got dtype %R",
                     (PyObject *)PyArray_DESCR(a));
        Py_DECREF(a);
        return -1;
    }
    if (type_of(PyArray_DESCR(a), &t) != 0) {
        PyArrayObject *f = (PyArrayObject *)PyArray_FROM_OTF((PyObject *)a, NPY_FLOAT32,
                                                            NPY_ARRAY_FORCECAST);
        Py_DECREF(a);
        if (!f)
            return -1;
        a = f;
    }
    own(c, (PyObject *)a);
    if (PyArray_NDIM(a) > SINPE_MAX_DIMS) {
        PyErr_SetString(PyExc_ValueError, "positions has too many dimensions");
        return -1;
    }
    return ndarray_view(a, "positions", v);
}

/* dtype: an np.dtype (the package resolves spellings) for a fresh result, and the type it
 * asks out= to have. */
int to_dtype(call *c, PyObject *dtype, PyObject *asked)
{
    c->dtype_obj = asked == Py_None ? NULL : asked;
    if (dtype == Py_None)
        return 0;
    if (!PyArray_DescrCheck(dtype)) {
        PyErr_SetString(PyExc_TypeError, "dtype must be a numpy dtype (the package resolves it)");
        return -1;
    }
    sinpe_type t;
    if (type_of((PyArray_Descr *)dtype, &t) != 0 || t > SINPE_BF16) {
        PyErr_Format(PyExc_TypeError, "dtype must be float32, float16, bfloat16 or float64, got %R",
                     c->dtype_obj ? c->dtype_obj : dtype);
        return -1;
    }
    Py_INCREF(dtype);
    c->descr = (PyArray_Descr *)dtype;
    c->job.want_type = (int)t;
    return 0;
}

/* The destination: out (a buffer), or a fresh array of the result's shape and dtype. */
int to_dst(call *c, PyObject *out)
{
    if (out != Py_None)
        return view_get(c, 0, out, c->what, &c->job.dst);
    c->job.fresh = 1;
    if (!c->descr && !(c->descr = PyArray_DescrFromType(NPY_FLOAT)))
        return -1;
    sinpe_type t = SINPE_F32;
    type_of(c->descr, &t);
    c->job.dst.type = t;
    return 0;
}

/* ---- the entry points' arguments ------------------------------------------------------------ */

int parse_args(const char *fname, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
               const char *const *kw, int n, PyObject **out)
{
    if (nargs > n) {
        PyErr_Format(PyExc_TypeError, "%s() takes %d arguments (%zd given)", fname, n, nargs);
        return -1;
    }
    for (int i = 0; i < n; i++)
        out[i] = i < nargs ? args[i] : NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        int i = 0;
        while (i < n && PyUnicode_CompareWithASCIIString(name, kw[i]) != 0)
            i++;
        if (i == n) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument %R", fname,
                         name);
            return -1;
        }
        if (out[i]) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fname,
                         kw[i]);
            return -1;
        }
        out[i] = args[nargs + k];
    }
    for (int i = 0; i < n; i++)
        if (!out[i]) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s' (pos %d)", fname,
                         kw[i], i + 1);
            return -1;
        }
    return 0;
}

int to_int(PyObject *o, const char *name, int *v)
{
    int64_t x;
    if (to_int64(o, name, &x) < 0)
        return -1;
    if (x < INT_MIN || x > INT_MAX) {
        PyErr_Format(PyExc_OverflowError, "%s=%R does not fit in a C int", name, o);
        return -1;
    }
    *v = (int)x;
    return 0;
}

int to_double(PyObject *o, double *v)
{
    *v = PyFloat_AsDouble(o);
    return *v == -1.0 && PyErr_Occurred() ? -1 : 0;
}

int to_bool(PyObject *o, int *v)
{
    *v = PyObject_IsTrue(o);
    return *v < 0 ? -1 : 0;
}

/* A table (opt 0: anything array-like, else a float32 copy) or an optional array (opt 1:
 * None gives data NULL), read or written where it is. */
int rope_view(call *c, PyObject *o, const char *what, sinpe_array *v, int opt)
{
    memset(v, 0, sizeof *v);
    if (opt && o == Py_None)
        return 0;
    if (PyArray_Check(o) || (!PyObject_CheckBuffer(o) && PyObject_HasAttrString(o, "__dlpack__")))
        return view_get(c, 1, o, what, v);
    if (!opt)
        return float_array(c, o, what, v);
    PyErr_Format(PyExc_TypeError, "%s must be an ndarray or a DLPack exporter, got %s", what,
                 Py_TYPE(o)->tp_name);
    return -1;
}
