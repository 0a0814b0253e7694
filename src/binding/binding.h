/* The binding's shared pieces (binding layer): one call's job and what its messages name
 * (binding/call.c), the converters (binding/convert.c) and the status-to-exception map
 * (binding/errors.c).  The module itself is binding/_sinpe.c.  Who uses whom, one way only:
 * _sinpe.c -> convert.c, errors.c -> call.c (a test checks it). */
#ifndef SINPE_BINDING_BINDING_H
#define SINPE_BINDING_BINDING_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#ifndef SINPE_BINDING_MAIN
#define NO_IMPORT_ARRAY
#endif
#define PY_ARRAY_UNIQUE_SYMBOL sinpe_ARRAY_API
#include <numpy/arrayobject.h>

#include <stdint.h>

#include "sinpe.h"

extern const char *const SINPE_TYPE_NAMES[SINPE_TYPE_COUNT];

/* ---- the module's state: torch's C-level export, when the package has handed it ------------ */

/* tensor_type (torch.Tensor) and to_dlpack (torch._C._to_dlpack_versioned), both NULL until
 * the package passes them (sinpe._sinpe.tensor_route): a tensor of exactly that type is then
 * exported by that function, without torch's Python-level __dlpack__ (convert.c). */
typedef struct {
    PyObject *tensor_type, *to_dlpack, *bump; /* bump: torch._C._increment_version */
} tensor_route;

/* convert.c: the module's methods and slots of its state */
extern const char tensor_route_doc[];
PyObject *py_tensor_route(PyObject *self, PyObject *args);

int module_traverse(PyObject *m, visitproc visit, void *arg);
int module_clear(PyObject *m);
void module_free(void *m);

/* runtime.c */
extern const char adopt_openmp_doc[], openmp_adopted_doc[];
PyObject *py_adopt_openmp(PyObject *self, PyObject *lib);
PyObject *py_openmp_adopted(PyObject *self, PyObject *unused);

/* held.c */
extern const char add_held_doc[];
PyObject *py_add_held(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

/* ---- one call: the job and what its messages name ------------------------------------- */

typedef struct {
    sinpe_job job;
    sinpe_opts opts;
    long long threads, torch_threads; /* as given, for the messages */
    const char *what;                 /* the destination's name: "out" or "x" */
    const char *what2;                /* a rotation's second array's name (k), or NULL */
    const char *noun;                 /* what the memory refusal says is made */
    const char *rows_name, *cols_name;
    PyObject *base_obj, *dtype_obj;   /* as given (borrowed; NULL: the default) */
    const char *base_name;            /* the base's parameter name ("base", "rope_theta") */
    Py_buffer buf[2];                 /* the destination's and the source's buffers */
    int have_buf[2];
    PyObject *owned[8];               /* made here: positions, tables, DLPack capsules */
    int nowned;
    PyArray_Descr *descr;             /* a fresh result's dtype (owned) */
    PyObject *result;                 /* a fresh result (owned) */
    sinpe_preset preset;
    sinpe_freq freq;
    int huge;                         /* advise huge pages for a fresh result */
    const tensor_route *route;        /* the module's (NULL: none) */
    PyObject *kept_make;              /* borrowed: called after prepare for the kept rows */
} call;


/* call.c */
void call_init(call *c, const char *what, const char *rows_name, const char *cols_name);
void call_clear(call *c);
PyObject *own(call *c, PyObject *o);
PyObject *shape_tuple(int n, const int64_t *shape);
/* Destinations of at most this many values are written with the GIL held (some microseconds
 * of work at most); stmt runs with the GIL released unless small. */
#define SMALL_VALUES 16384
#define UNLOCKED_UNLESS(small, stmt) \
    do { \
        if (small) { \
            stmt; \
        } else { \
            Py_BEGIN_ALLOW_THREADS stmt; \
            Py_END_ALLOW_THREADS \
        } \
    } while (0)

/* errors.c */
void raise_status(int st, const call *c);
void raise_memory_of(const char *noun, const sinpe_array *x, const sinpe_need *n);

/* convert.c */
int to_int64(PyObject *o, const char *name, int64_t *v);
int to_real(PyObject *o, const char *name, double *v);
/* An optional float32 factor: None leaves *on 0; a real sets *on = 1 and *v. */
int to_scale(PyObject *o, const char *name, int *on, float *v);
int to_opts(PyObject *t, call *c);
int type_of(PyArray_Descr *d, sinpe_type *t);
int ndarray_view(PyArrayObject *a, const char *what, sinpe_array *v);
int view_get(call *c, int slot, PyObject *o, const char *what, sinpe_array *v);
int float_array(call *c, PyObject *o, const char *what, sinpe_array *v);
int rope_view(call *c, PyObject *o, const char *what, sinpe_array *v, int opt);
int positions_get(call *c, PyObject *o, sinpe_array *v);
int to_dtype(call *c, PyObject *dtype, PyObject *asked);
int to_dst(call *c, PyObject *out);
/* An entry point's arguments, positional (in the order of kw) or by keyword (kw's names):
 * out[i] the argument of kw[i], every one required (a TypeError names what is wrong). */
int parse_args(const char *fname, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
               const char *const *kw, int n, PyObject **out);
int rope_names(PyObject *names, const char *nm[6]);
int to_int(PyObject *o, const char *name, int *v);
int to_double(PyObject *o, double *v);
int to_bool(PyObject *o, int *v);

/* One declaration of an entry point's parameters, LIST(X) = X(first) X(second) ...: from it
 * come the docstring's text signature (SIGNATURE), the parser's keyword names (KEYWORDS)
 * and the parsed arguments by name (ARGS: a.p.name, or a.a[] for the parser); ENTRY_POINT
 * puts them together. */
#define BINDING_SIG_(n) ", " #n
#define BINDING_KW_(n) #n,
#define BINDING_FIELD_(n) PyObject *n;
#define BINDING_ONE_(n) +1
#define SIGNATURE(name, LIST) name "($module" LIST(BINDING_SIG_) ")\n--\n\n"
#define KEYWORDS(LIST) { LIST(BINDING_KW_) NULL }
#define NPARAMS(LIST) (0 LIST(BINDING_ONE_))
#define ARGS(LIST) union { struct { LIST(BINDING_FIELD_) } p; PyObject *a[NPARAMS(LIST)]; }

/* An entry point of the parameters LIST (METH_FASTCALL | METH_KEYWORDS), written once:
 * py_NAME parses them (parse_args) and calls NAME_call(self, a) with the parsed arguments
 * by name (a->p.first ...), which the entry point's file defines. */
#define ENTRY_POINT(name, LIST)                                                              \
    typedef ARGS(LIST) name##_args;                                                          \
    static const char *const name##_kw[] = KEYWORDS(LIST);                                   \
    static PyObject *name##_call(PyObject *self, const name##_args *a);                      \
    static PyObject *py_##name(PyObject *self, PyObject *const *args, Py_ssize_t nargs,      \
                               PyObject *kwnames)                                            \
    {                                                                                        \
        name##_args a;                                                                       \
        if (parse_args(#name, args, nargs, kwnames, name##_kw, NPARAMS(LIST), a.a) < 0)      \
            return NULL;                                                                     \
        return name##_call(self, &a);                                                        \
    }

#endif
