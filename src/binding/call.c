/* One call's state and the small helpers every binding file shares (binding.h): the
 * element types' names, a call's setup and release, objects it owns, shape tuples.  The
 * other binding files include binding.h and use these; this file uses none of theirs, so
 * the binding's files depend in one direction only: _sinpe.c -> convert.c, errors.c ->
 * call.c. */
#include "binding/binding.h"

#include <string.h>

const char *const SINPE_TYPE_NAMES[SINPE_TYPE_COUNT] = {
    "float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
};

/* ---- one call -------------------------------------------------------------------------------- */

void call_init(call *c, const char *what, const char *rows_name, const char *cols_name)
{
    memset(c, 0, sizeof *c);
    c->job.want_type = -1;
    c->what = what;
    c->noun = "a table";
    c->base_name = "base";
    c->rows_name = rows_name;
    c->cols_name = cols_name;
}

void call_clear(call *c)
{
    for (int i = 0; i < 2; i++)
        if (c->have_buf[i])
            PyBuffer_Release(&c->buf[i]);
    for (int i = 0; i < c->nowned; i++)
        Py_DECREF(c->owned[i]);
    c->nowned = 0;
    c->have_buf[0] = c->have_buf[1] = 0;
    Py_CLEAR(c->descr);
}

PyObject *own(call *c, PyObject *o)
{
    if (o && c->nowned == (int)(sizeof c->owned / sizeof c->owned[0])) {
        Py_DECREF(o); /* no call owns more than a handful; never past the array */
        PyErr_SetString(PyExc_RuntimeError, "sinpe: too many objects held by one call");
        return NULL;
    }
    if (o)
        c->owned[c->nowned++] = o;
    return o;
}

PyObject *shape_tuple(int n, const int64_t *shape)
{
    PyObject *t = PyTuple_New(n < 0 ? 0 : n);
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
