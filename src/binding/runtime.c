/* Which threads run the core's parallel work (sinpe.h: sinpe_set_thread_runtime): the
 * package decides (sinpe/_backends/runtime.py) and passes the library; this converts. */
#include "binding/binding.h"

const char adopt_openmp_doc[] =
"adopt_openmp($module, library, /)\n"
"--\n\n"
"Run parallel work from now on on the OpenMP runtime library (the path of one this process\n"
"has loaded), or for None on sinpe's own threads; OSError when the core cannot\n"
"(sinpe_set_thread_runtime).\n";

PyObject *py_adopt_openmp(PyObject *self, PyObject *lib)
{
    (void)self;
    PyObject *bytes = NULL;
    if (lib != Py_None && !PyUnicode_FSConverter(lib, &bytes))
        return NULL;
    int st = sinpe_set_thread_runtime(bytes ? PyBytes_AS_STRING(bytes) : NULL);
    Py_XDECREF(bytes);
    if (st != SINPE_OK) {
        PyErr_Format(PyExc_OSError, "library %R: %s", lib, sinpe_strerror(st));
        return NULL;
    }
    Py_RETURN_NONE;
}

const char openmp_adopted_doc[] =
"openmp_adopted($module, /)\n"
"--\n\n"
"True while an OpenMP runtime runs the parallel work (sinpe_thread_runtime).\n";

PyObject *py_openmp_adopted(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(sinpe_thread_runtime());
}
