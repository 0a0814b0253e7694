/* The held add (add_pe's held route, sinpe/_held.py): x += rows a caller holds, by the core's
 * sinpe_add_held, for an ndarray x read in place or any exporter add_pe takes (a torch tensor
 * by DLPack, through the module's tensor route).  It converts and calls; whether the route
 * applies is the package's policy, whether x suits the held add the core's check. */
#include "binding/binding.h"

/* The held add releases the GIL from this many values (NumPy's own adds release it too). */
#define HELD_NOGIL_VALUES ((int64_t)1 << 16)

const char add_held_doc[] =
"add_held($module, path, threads, rows, x, /)\n"
"--\n\n"
"x += rows by the core's held add (sinpe.h: sinpe_add_held) on code path `path` and up to\n"
"`threads` threads, for rows an\n"
"ndarray and x an ndarray or any exporter add_pe takes (a torch tensor by DLPack): True when\n"
"added; False, nothing written, when the core's held add does not take them (the caller\n"
"then goes a job's way, whose check names what it refuses).\n";

/* x as the core sees it; 0, or -1 with no error set when it is no array the core writes (the
 * job's way names it), or -1 with an error that is not an Exception's (KeyboardInterrupt). */
static int held_view(call *c, PyObject *x, sinpe_array *v)
{
    int st = PyArray_Check(x) ? ndarray_view((PyArrayObject *)x, "x", v)
                              : view_get(c, 0, x, "x", v);
    if (st < 0 && PyErr_ExceptionMatches(PyExc_Exception))
        PyErr_Clear();
    return st;
}

/* A tensor of exactly the route's type, just written: its version moves now, before any
 * Python code (a signal's handler) could run, as torch's in-place ops move it. */
static int bumped(const tensor_route *r, PyObject *x)
{
    if (!r || !r->bump || (PyObject *)Py_TYPE(x) != r->tensor_type)
        return 0;
    PyObject *t = PyTuple_Pack(1, x);
    PyObject *res = t ? PyObject_CallOneArg(r->bump, t) : NULL;
    Py_XDECREF(t);
    Py_XDECREF(res);
    return res ? 0 : -1;
}

PyObject *py_add_held(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int path, threads, st = -1;
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "add_held takes 4 arguments, got %zd", nargs);
        return NULL;
    }
    if (to_int(args[0], "path", &path) < 0 || to_int(args[1], "threads", &threads) < 0)
        return NULL;
    args++; /* rows, x */
    sinpe_array rows, x;
    if (!PyArray_Check(args[1]) || ndarray_view((PyArrayObject *)args[1], "rows", &rows) < 0) {
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    call c;
    int ndarray = PyArray_Check(args[2]);
    if (!ndarray) {
        call_init(&c, "x", "rows", "columns");
        c.route = PyModule_GetState(self);
    }
    if (held_view(&c, args[2], &x) == 0) {
        if (sinpe_elements(x.ndim, x.shape) >= HELD_NOGIL_VALUES) {
            Py_BEGIN_ALLOW_THREADS
            st = sinpe_add_held(&x, &rows, path, threads);
            Py_END_ALLOW_THREADS
        } else {
            st = sinpe_add_held(&x, &rows, path, threads);
        }
    }
    if (!ndarray)
        call_clear(&c);
    if (PyErr_Occurred())
        return NULL;
    if (st == SINPE_OK && !ndarray && bumped(PyModule_GetState(self), args[2]) < 0)
        return NULL; /* written; the version's move failed (never for the route's tensors) */
    return PyBool_FromLong(st == SINPE_OK);
}

