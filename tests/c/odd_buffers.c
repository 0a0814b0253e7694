/* Buffer exporters the standard library does not have, for the tests
 * (built by tests/conftest.py: odd_buffers_module()):
 *   Odd(0, rows, cols): float32, shape (rows, cols), strides left NULL
 *                       (C-contiguous, as ctypes arrays export);
 *   Odd(1, rows, cols): float32, shape and strides left NULL (one axis of
 *                       rows * cols items);
 *   Odd(2, rows, cols): float32 with suboffsets (an indirect, PIL-style
 *                       buffer), which sinpe must refuse.
 * .tobytes() returns the memory, so a test can see what was written. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct {
    PyObject_HEAD
    char *mem;
    Py_ssize_t len;
    int kind;
    Py_ssize_t shape[2], strides[2], suboffsets[2];
} Odd;

static int odd_init(Odd *self, PyObject *args, PyObject *kw)
{
    (void)kw;
    Py_ssize_t rows, cols;
    if (!PyArg_ParseTuple(args, "inn", &self->kind, &rows, &cols))
        return -1;
    self->len = rows * cols * 4;
    self->mem = PyMem_Calloc((size_t)self->len + 1, 1);
    if (!self->mem) {
        PyErr_NoMemory();
        return -1;
    }
    self->shape[0] = rows;
    self->shape[1] = cols;
    self->strides[0] = cols * 4;
    self->strides[1] = 4;
    self->suboffsets[0] = self->suboffsets[1] = -1;
    return 0;
}

static void odd_dealloc(Odd *self)
{
    PyMem_Free(self->mem);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int odd_getbuffer(Odd *self, Py_buffer *v, int flags)
{
    v->buf = self->mem;
    v->obj = (PyObject *)self;
    Py_INCREF(self);
    v->len = self->len;
    v->itemsize = 4;
    v->readonly = 0;
    v->format = (flags & PyBUF_FORMAT) ? "f" : NULL;
    v->ndim = self->kind == 1 ? 1 : 2;
    v->shape = self->kind == 1 ? NULL : self->shape;
    v->strides = self->kind == 2 ? self->strides : NULL;
    v->suboffsets = self->kind == 2 ? self->suboffsets : NULL;
    v->internal = NULL;
    return 0;
}

static PyObject *odd_tobytes(Odd *self, PyObject *unused)
{
    (void)unused;
    return PyBytes_FromStringAndSize(self->mem, self->len);
}

static PyBufferProcs odd_as_buffer = { (getbufferproc)odd_getbuffer, NULL };

static PyMethodDef odd_methods[] = {
    { "tobytes", (PyCFunction)odd_tobytes, METH_NOARGS, NULL },
    { NULL, NULL, 0, NULL },
};

static PyTypeObject OddType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "odd_buffers.Odd",
    .tp_basicsize = sizeof(Odd),
    .tp_dealloc = (destructor)odd_dealloc,
    .tp_as_buffer = &odd_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = odd_methods,
    .tp_init = (initproc)odd_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef moduledef = { PyModuleDef_HEAD_INIT, "odd_buffers", NULL, -1, NULL,
                                        NULL, NULL, NULL, NULL };

PyMODINIT_FUNC PyInit_odd_buffers(void)
{
    if (PyType_Ready(&OddType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    Py_INCREF(&OddType);
    if (PyModule_AddObject(m, "Odd", (PyObject *)&OddType) < 0) {
        Py_DECREF(&OddType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
