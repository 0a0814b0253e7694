/* _sinpe: the CPython / NumPy binding of the sinpe core.
 *
 * It decides nothing.  The package (sinpe/) resolves names and defaults (which backend,
 * which code path, how many threads) and calls these functions with plain values; every
 * rule lives in the core (sinpe_job_prepare).  The binding only converts:
 *   - Python objects to the core's values (binding/convert.c): integers, reals, options,
 *     arrays and buffers to sinpe_array (view_get), position array-likes to arrays;
 *   - here: one job builder per kind, each a few lines over the same pieces, and one runner
 *     (run_call): prepare, allocate a fresh result, run the plan in steps with the GIL
 *     released and signals checked between steps;
 *   - one status-to-exception mapper (binding/errors.c), whose messages name the parameter
 *     and its value.
 * The module keeps no state; the libraries the backends load are process-wide.
 */
#define SINPE_BINDING_MAIN
#include "binding/binding.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Jobs run in steps of about this many values per thread, with the GIL released; between
 * steps pending signals are handled, so Ctrl-C stops any call within milliseconds (2M
 * values: about 20 ms on the scalar path). */
#define STEP_VALUES ((int64_t)1 << 21)

#define TYPE_NAMES SINPE_TYPE_NAMES

/* ---- running a call: the one loop that releases the GIL -------------------------------- */

static int make_kept(call *c);

static int allocate(call *c)
{
    sinpe_array *x = &c->job.dst;
    npy_intp dims[SINPE_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++)
        dims[i] = (npy_intp)x->shape[i];
    Py_INCREF(c->descr);
    c->result = PyArray_NewFromDescr(&PyArray_Type, c->descr, x->ndim, dims, NULL, NULL, 0, NULL);
    if (!c->result)
        return -1;
    PyArrayObject *r = (PyArrayObject *)c->result;
    x->data = PyArray_BYTES(r);
    for (int i = 0; i < x->ndim; i++)
        x->strides[i] = PyArray_STRIDES(r)[i];
    sinpe_fresh_memory(x->data, (int64_t)PyArray_NBYTES(r), c->huge);
    return 0;
}

/* Prepares the job's plan (every rule once), allocates a fresh result, and runs the plan in
 * steps with the GIL released, handling signals between steps (an interrupted job has done
 * a prefix of its work: sinpe.h).  Returns the result (new reference): the fresh array, or inplace. */
static PyObject *run_call(call *c, PyObject *inplace)
{
    PyObject *ret = NULL;
    sinpe_plan *p = NULL;
    if (c->job.kind == SINPE_JOB_MAP || c->job.kind == SINPE_JOB_FREQS) /* float32 or 64 */
        c->job.dst.type = c->job.kind == SINPE_JOB_FREQS && c->freq.kind == SINPE_FREQ_POW64
                              ? SINPE_F64 : SINPE_F32;
    int st, done = 0;
    if (c->kept_make) { /* a kept buffer to make: every rule first (its bytes admitted with the
                         * result's), then the buffer, then the plan with it */
        st = sinpe_job_prepare(&c->job, &c->opts);
        if (st != SINPE_OK) {
            raise_status(st, c);
            goto out;
        }
        if (make_kept(c) < 0)
            goto out;
    }
    /* a small job runs with the GIL held: releasing and taking it back costs more than the
     * work (and may hand the GIL to another thread for a while) */
    int small = c->job.dst.data && sinpe_elements(c->job.dst.ndim, c->job.dst.shape) <= SMALL_VALUES;
    UNLOCKED_UNLESS(small, st = sinpe_plan_prepare(&c->job, &c->opts, &p)); /* every rule once */
    if (st != SINPE_OK) {
        raise_status(st, c);
        goto out;
    }
    if (c->job.fresh) {
        if (!c->descr && !(c->descr = PyArray_DescrFromType(c->job.dst.type == SINPE_F64
                                                            ? NPY_DOUBLE : NPY_FLOAT)))
            goto out;
        if (allocate(c) < 0)
            goto out;
        st = sinpe_plan_bind(p, c->job.dst.data, c->job.dst.strides);
    }
    small = sinpe_elements(c->job.dst.ndim, c->job.dst.shape) <= SMALL_VALUES;
    while (st == SINPE_OK) {
        UNLOCKED_UNLESS(small, st = sinpe_plan_step(p, STEP_VALUES * c->opts.threads, &done));
        if (st != SINPE_OK || done)
            break;
        if (PyErr_CheckSignals() < 0)
            goto out;
    }
    if (st != SINPE_OK) {
        raise_status(st, c);
        goto out;
    }
    ret = c->job.fresh ? c->result : inplace;
    Py_INCREF(ret);
out:
    sinpe_plan_free(p);
    Py_XDECREF(c->result);
    c->result = NULL;
    call_clear(c);
    return ret;
}

/* ---- the job builders --------------------------------------------------------------------- */

/* A preset table's description: (freq, col, comp, scale, zero_row, trow_shift, f64_div
 * [, out_scale]). */
static int to_preset(call *c, PyObject *t)
{
    PyObject *o_freq, *o_col, *o_comp, *o_scale, *o_out_scale = Py_None;
    long long zero_row, trow_shift;
    int f64_div;
    if (!PyArg_ParseTuple(t, "OOOOLLp|O:preset", &o_freq, &o_col, &o_comp, &o_scale, &zero_row,
                          &trow_shift, &f64_div, &o_out_scale))
        return -1;
    sinpe_preset *sp = &c->preset;
    PyArrayObject *freq = (PyArrayObject *)own(c, PyArray_FROM_OF(o_freq, NPY_ARRAY_IN_ARRAY));
    PyArrayObject *col = (PyArrayObject *)own(c, PyArray_FROM_OTF(o_col, NPY_INT64,
                                                                 NPY_ARRAY_IN_ARRAY | NPY_ARRAY_FORCECAST));
    if (!freq || !col)
        return -1;
    if (PyArray_NDIM(freq) != 1 || PyArray_NDIM(col) != 1
        || (PyArray_TYPE(freq) != NPY_FLOAT && PyArray_TYPE(freq) != NPY_DOUBLE)) {
        PyErr_SetString(PyExc_TypeError, "preset: freq must be 1-d float32 or float64, col 1-d "
                                         "integers");
        return -1;
    }
    sp->nang = PyArray_DIM(freq, 0);
    if (PyArray_TYPE(freq) == NPY_FLOAT)
        sp->freq = (const float *)PyArray_DATA(freq);
    else
        sp->freq64 = (const double *)PyArray_DATA(freq);
    sp->f64_div = f64_div;
    sp->col = (const int64_t *)PyArray_DATA(col);
    sp->ncol = PyArray_DIM(col, 0);
    sp->ncomp = 1;
    if (o_comp != Py_None) {
        PyArrayObject *comp = (PyArrayObject *)own(c, PyArray_FROM_OTF(o_comp, NPY_INT32,
                                                                      NPY_ARRAY_IN_ARRAY | NPY_ARRAY_FORCECAST));
        if (!comp)
            return -1;
        if (PyArray_NDIM(comp) != 1 || PyArray_DIM(comp, 0) != sp->nang) {
            PyErr_SetString(PyExc_ValueError, "preset: comp must have one entry per angle");
            return -1;
        }
        sp->comp = (const int32_t *)PyArray_DATA(comp);
        for (npy_intp i = 0; i < sp->nang; i++)
            if (sp->comp[i] > 0)
                sp->ncomp = 2;
    }
    if (to_scale(o_scale, "scale", &sp->scaled, &sp->scale) < 0
        || to_scale(o_out_scale, "out_scale", &sp->out_scaled, &sp->out_scale) < 0)
        return -1;
    sp->zero_row = zero_row;
    sp->trow_shift = trow_shift;
    c->job.preset = sp;
    return 0;
}

/* Where the rows' positions come from: rows (an int: offset .. offset + rows - 1), positions
 * (array-like), or grid (h, w, lead). */
/* kept: None; (rows, first, ready_first, ready_end, fill_first, fill_end) with rows a
 * C-contiguous float32 array (n, stride) the caller keeps (sinpe.h: sinpe_job.kept; the core
 * checks the rest); or (reserve, make): make() is called once the job is checked (reserve
 * bytes counted with the result's by the memory rule), before its plan is prepared and returns None or such a
 * tuple. */
static int to_kept(call *c, PyObject *kept)
{
    if (kept == Py_None)
        return 0;
    sinpe_kept *k = &c->job.kept;
    if (PyTuple_Check(kept) && PyTuple_GET_SIZE(kept) == 2) {
        long long reserve;
        if (!PyArg_ParseTuple(kept, "LO;kept must be (reserve, make)", &reserve, &c->kept_make))
            return -1;
        k->reserve = reserve;
        return 0;
    }
    PyObject *rows;
    long long first, r0, r1, f0, f1;
    if (!PyArg_ParseTuple(kept, "OLLLLL;kept must be (rows, first, ready_first, ready_end, "
                          "fill_first, fill_end)", &rows, &first, &r0, &r1, &f0, &f1))
        return -1;
    PyArrayObject *a = (PyArrayObject *)rows;
    if (!PyArray_Check(rows) || PyArray_TYPE(a) != NPY_FLOAT || PyArray_NDIM(a) != 2
        || !PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISWRITEABLE(a) || !PyArray_ISALIGNED(a)) {
        PyErr_SetString(PyExc_TypeError, "kept rows must be a writable C-contiguous float32 "
                        "array (rows, stride)");
        return -1;
    }
    k->data = (float *)PyArray_DATA(a);
    k->rows = PyArray_DIM(a, 0);
    k->stride = PyArray_DIM(a, 1);
    k->first = first;
    k->ready_first = r0;
    k->ready_end = r1;
    k->fill_first = f0;
    k->fill_end = f1;
    k->reserve = 0;
    return 0;
}

/* The kept rows made once the job is checked (to_kept's make). */
static int make_kept(call *c)
{
    PyObject *make = c->kept_make;
    c->kept_make = NULL;
    c->job.kept.reserve = 0;
    PyObject *t = own(c, PyObject_CallNoArgs(make));
    return !t || to_kept(c, t) < 0 ? -1 : 0; /* the plan's preparation checks it */
}

static int to_rows(call *c, PyObject *rows, PyObject *positions, PyObject *grid)
{
    sinpe_job *j = &c->job;
    if (grid != Py_None) {
        long long h, w, lead;
        if (!PyArg_ParseTuple(grid, "LLL:grid", &h, &w, &lead))
            return -1;
        j->pos.mode = SINPE_POS_GRID;
        j->pos.grid_h = h;
        j->pos.grid_w = w;
        j->pos.grid_lead = lead;
        return 0;
    }
    if (positions != Py_None) {
        j->pos.mode = SINPE_POS_ARRAY;
        return positions_get(c, positions, &j->pos.at);
    }
    return rows == Py_None ? 0 : to_int64(rows, c->rows_name, &j->rows);
}

/* A job's call on the module's route: its names of the result, rows and columns (messages). */
static sinpe_job *job_call(call *c, PyObject *self, sinpe_job_kind kind, const char *what,
                           const char *rows_name, const char *cols_name)
{
    call_init(c, what, rows_name, cols_name);
    c->route = PyModule_GetState(self);
    c->job.kind = kind;
    return &c->job;
}

/* Where a TABLE's or ADD's rows sit in the table: base, offset, and the length of the table
 * they come from (max_len). */
static int to_placement(call *c, PyObject *base, PyObject *offset, PyObject *table_rows)
{
    sinpe_job *j = &c->job;
    c->base_obj = base;
    return to_real(base, "base", &j->base) < 0 || to_int64(offset, "offset", &j->offset) < 0
                   || to_int64(table_rows, "max_len", &j->table_rows) < 0
               ? -1 : 0;
}

static const char *utf8_or(PyObject *o, const char *fallback)
{
    const char *s = o && PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    return s ? s : fallback;
}

#define TABLE_PARAMS(X) X(opts) X(out) X(rows) X(cols) X(base) X(offset) X(positions) X(grid) \
    X(dtype) X(dtype_asked) X(table_rows) X(preset) X(names) X(huge) X(fill) X(flags) X(kept)

PyDoc_STRVAR(table_doc,
SIGNATURE("table", TABLE_PARAMS)
"A table (a TABLE job): rows offset .. offset+rows-1 (rows an int), or positions (an\n"
"array-like), or a grid (h, w, lead) of 2-d positions; cols columns (d_model), or a preset\n"
"(freq, col, comp, scale, zero_row, trow_shift, f64_div).  out: a buffer to fill, or None for\n"
"a fresh array of np.dtype dtype (huge: advise huge pages).  names: (out, rows, cols) as\n"
"the messages name them.  fill=False returns the fresh array (or out) after every check,\n"
"unfilled.  flags: 1, out may have one more leading axis of length 1; 2, torch's tensor\n"
"is the rows offset .. offset+rows-1 themselves.  kept: None, (rows, first, ready_first,\n"
"ready_end, fill_first, fill_end): float32 rows of the table a cache keeps (sinpe.h,\n"
"sinpe_job.kept), or (reserve, make): make() returns None or such a tuple once the job is\n"
"checked (reserve bytes admitted with its result).\n");

ENTRY_POINT(table, TABLE_PARAMS)

static PyObject *table_call(PyObject *self, const table_args *a)
{
    PyObject *out = a->p.out, *names = a->p.names;
    long f = PyLong_AsLong(a->p.flags);
    if (f == -1 && PyErr_Occurred())
        return NULL;
    call c;
    PyObject *n0 = PyTuple_Check(names) && PyTuple_GET_SIZE(names) == 3 ? names : NULL;
    sinpe_job *j = job_call(&c, self, SINPE_JOB_TABLE,
                            n0 ? utf8_or(PyTuple_GET_ITEM(n0, 0), "out") : "out",
                            n0 ? utf8_or(PyTuple_GET_ITEM(n0, 1), "max_len") : "max_len",
                            n0 ? utf8_or(PyTuple_GET_ITEM(n0, 2), "d_model") : "d_model");
    c.huge = PyObject_IsTrue(a->p.huge) == 1;
    j->lead_one = (f & 1) != 0;
    j->own_tensor = (f & 2) != 0;
    if (to_opts(a->p.opts, &c) < 0
        || (a->p.cols != Py_None && to_int64(a->p.cols, c.cols_name, &j->cols) < 0)
        || to_placement(&c, a->p.base, a->p.offset, a->p.table_rows) < 0
        || (a->p.preset != Py_None && to_preset(&c, a->p.preset) < 0)
        || to_rows(&c, a->p.rows, a->p.positions, a->p.grid) < 0
        || to_dtype(&c, a->p.dtype, a->p.dtype_asked) < 0 || to_dst(&c, out) < 0
        || to_kept(&c, a->p.kept) < 0) {
        call_clear(&c);
        return NULL;
    }
    if (PyObject_IsTrue(a->p.fill) != 1) { /* checked (and a fresh result allocated), not filled */
        int st = sinpe_job_prepare(j, &c.opts);
        PyObject *r = NULL;
        if (st != SINPE_OK)
            raise_status(st, &c);
        else if (!j->fresh)
            Py_INCREF(r = out);
        else if (allocate(&c) == 0)
            r = c.result;
        call_clear(&c);
        return r;
    }
    return run_call(&c, out);
}

#define ADD_PARAMS(X) X(opts) X(x) X(base) X(offset) X(positions) X(table_rows) X(grow) X(kept)

PyDoc_STRVAR(add_doc,
SIGNATURE("add", ADD_PARAMS)
"x += the table, in place (an ADD job); returns x.  table_rows: the length of the table the\n"
"rows come from (grow: it may be too short, then the rows' own).  kept: as for table.\n");

ENTRY_POINT(add, ADD_PARAMS)

static PyObject *add_call(PyObject *self, const add_args *a)
{
    call c;
    sinpe_job *j = job_call(&c, self, SINPE_JOB_ADD, "x", "seq_len", "d_model");
    c.noun = "adding to an array";
    j->table_grow = PyObject_IsTrue(a->p.grow) == 1;
    /* positions first: their __array__ runs before x is exported */
    if (to_opts(a->p.opts, &c) < 0
        || to_placement(&c, a->p.base, a->p.offset, a->p.table_rows) < 0
        || to_rows(&c, Py_None, a->p.positions, Py_None) < 0
        || view_get(&c, 0, a->p.x, "x", &j->dst) < 0 || to_kept(&c, a->p.kept) < 0) {
        call_clear(&c);
        return NULL;
    }
    return run_call(&c, a->p.x);
}

#define ROPE_PARAMS(X) X(opts) X(x) X(cos) X(sin) X(seq_axis) X(batch_axis) X(pairs) X(src) \
    X(x2) X(src2) X(names) X(form)

PyDoc_STRVAR(rope_doc,
SIGNATURE("rope", ROPE_PARAMS)
"Rotates x in place (a ROPE job) by tables cos, sin (tables, x.shape[seq_axis], rot), read\n"
"in place in their dtype and strides (arrays, DLPack exporters; else float32 copies); src\n"
"(None: x) is read; x2 (None: none) is rotated too, from src2 (None: x2).  names: None, or\n"
"the caller's names of (x, cos, sin, src, x2, src2) for messages.  form: 0 (torch's eager\n"
"ops) or sinpe_rope_form flags (an engine's arithmetic).  Returns x.\n");

ENTRY_POINT(rope, ROPE_PARAMS)

static PyObject *rope_call(PyObject *self, const rope_args *a)
{
    int seq_axis, batch_axis, pairs, form;
    const char *nm[6];
    if (to_int(a->p.seq_axis, "seq_axis", &seq_axis) < 0
        || to_int(a->p.batch_axis, "batch_axis", &batch_axis) < 0 || to_bool(a->p.pairs, &pairs) < 0
        || to_int(a->p.form, "form", &form) < 0 || rope_names(a->p.names, nm) < 0)
        return NULL;
    PyObject *o_opts = a->p.opts, *x = a->p.x, *cos = a->p.cos, *sin = a->p.sin;
    call c;
    sinpe_job *j = job_call(&c, self, SINPE_JOB_ROPE, nm[0], "seq_len", "head_dim");
    c.noun = "rotating an array";
    c.what2 = nm[4];
    j->rope.seq_axis = seq_axis;
    j->rope.batch_axis = batch_axis;
    j->rope.pairs = pairs;
    j->rope.form = form;
    j->rope.second = a->p.x2 != Py_None;
    if (to_opts(o_opts, &c) < 0 || view_get(&c, 0, x, nm[0], &j->dst) < 0
        || rope_view(&c, cos, nm[1], &j->rope.cos, 0) < 0
        || rope_view(&c, sin, nm[2], &j->rope.sin, 0) < 0
        || rope_view(&c, a->p.src, nm[3], &j->rope.src, 1) < 0
        || rope_view(&c, a->p.x2, nm[4], &j->rope.dst2, 1) < 0
        || rope_view(&c, a->p.src2, nm[5], &j->rope.src2, 1) < 0) {
        call_clear(&c);
        return NULL;
    }
    return run_call(&c, x);
}

PyDoc_STRVAR(map_doc,
"map($module, opts, func, x, /)\n"
"--\n\n"
"func(x) of a float32 ndarray (a MAP job: func 0 exp, 1 sin, 2 cos, as the backend computes\n"
"them; 3 log, glibc's on every backend); a new C-contiguous array.\n");

static PyObject *py_map(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o_opts, *x;
    int func;
    if (!PyArg_ParseTuple(args, "OiO:map", &o_opts, &func, &x))
        return NULL;
    call c;
    call_init(&c, "x", "n", "n");
    c.noun = "the result";
    c.job.kind = SINPE_JOB_MAP;
    c.job.func = (sinpe_func)func;
    c.job.fresh = 1;
    if (!PyArray_Check(x) || PyArray_TYPE((PyArrayObject *)x) != NPY_FLOAT32) {
        PyErr_Format(PyExc_TypeError, "x must be a float32 ndarray, got %s", Py_TYPE(x)->tp_name);
        return NULL;
    }
    if (to_opts(o_opts, &c) < 0 || float_array(&c, x, "x", &c.job.src) < 0) {
        call_clear(&c);
        return NULL;
    }
    return run_call(&c, NULL);
}

#define FREQS_PARAMS(X) X(opts) X(kind) X(n) X(start) X(step) X(group) X(a) X(b) X(m) X(base) \
    X(recip) X(base_name)

PyDoc_STRVAR(freqs_doc,
SIGNATURE("freqs", FREQS_PARAMS)
"A preset's frequency vector (a FREQS job; sinpe.h: sinpe_freq): kind 0 exp_mul, 1\n"
"exp_muldiv, 2 pow (float32; a, b, m and base rounded to float32 first, as torch rounds\n"
"Python scalars), 3 pow64 (float64) or 4 exp_log (MLX's); base_name names base in messages.\n");

ENTRY_POINT(freqs, FREQS_PARAMS)

static PyObject *freqs_call(PyObject *self, const freqs_args *p)
{
    (void)self;
    int kind, recip;
    int64_t n, start, step, group;
    double a, b, m, base;
    if (to_int(p->p.kind, "kind", &kind) < 0 || to_int64(p->p.n, "n", &n) < 0
        || to_int64(p->p.start, "start", &start) < 0 || to_int64(p->p.step, "step", &step) < 0
        || to_int64(p->p.group, "group", &group) < 0 || to_double(p->p.a, &a) < 0
        || to_double(p->p.b, &b) < 0 || to_double(p->p.m, &m) < 0
        || to_bool(p->p.recip, &recip) < 0)
        return NULL;
    PyObject *o_name = p->p.base_name;
    const char *base_name = PyUnicode_Check(o_name) ? PyUnicode_AsUTF8(o_name) : NULL;
    if (!base_name) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "freqs: base_name must be a str");
        return NULL;
    }
    PyObject *o_opts = p->p.opts, *o_base = p->p.base;
    call c;
    call_init(&c, "frequencies", "n", "n");
    c.noun = "a frequency vector";
    c.base_obj = o_base;
    c.base_name = base_name;
    if (to_real(o_base, base_name, &base) < 0)
        return NULL;
    sinpe_freq f = { (sinpe_freq_kind)kind, start, step, group, (float)a, (float)b, (float)m,
                     (float)base, b, base, recip };
    c.freq = f;
    c.job.kind = SINPE_JOB_FREQS;
    c.job.freq = &c.freq;
    c.job.rows = n;
    c.job.fresh = 1;
    if (to_opts(o_opts, &c) < 0)
        return NULL;
    return run_call(&c, NULL);
}

/* ---- rounding, registries, libraries ------------------------------------------------------ */

PyDoc_STRVAR(round_doc,
"round($module, x, dtype, /)\n"
"--\n\n"
"The float32 array x rounded to the np.dtype dtype (float16, bfloat16 or float64) as the\n"
"tables and add_pe round it (for tests).\n");

static PyObject *py_round(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o_x, *o_dtype;
    if (!PyArg_ParseTuple(args, "OO:round", &o_x, &o_dtype))
        return NULL;
    sinpe_type t;
    if (!PyArray_Check(o_x) || PyArray_TYPE((PyArrayObject *)o_x) != NPY_FLOAT32
        || PyArray_NDIM((PyArrayObject *)o_x) != 1 || !PyArray_DescrCheck(o_dtype)
        || type_of((PyArray_Descr *)o_dtype, &t) != 0 || t > SINPE_BF16) {
        PyErr_SetString(PyExc_TypeError, "round: x must be a 1-d float32 ndarray and dtype a "
                                         "float numpy dtype");
        return NULL;
    }
    PyArrayObject *in = (PyArrayObject *)PyArray_FROM_OTF(o_x, NPY_FLOAT32, NPY_ARRAY_IN_ARRAY);
    if (!in)
        return NULL;
    npy_intp n = PyArray_SIZE(in);
    Py_INCREF(o_dtype);
    PyObject *out = PyArray_NewFromDescr(&PyArray_Type, (PyArray_Descr *)o_dtype, 1, &n, NULL,
                                         NULL, 0, NULL);
    if (out)
        sinpe_round((const float *)PyArray_DATA(in), PyArray_DATA((PyArrayObject *)out),
                    (int64_t)n, t);
    Py_DECREF(in);
    return out;
}

PyDoc_STRVAR(positive_doc,
"positive($module, value, name, /)\n"
"--\n\n"
"value as a float after the core's rule of a base (finite and > 0), for the presets'\n"
"bases, periods and scales; the exceptions name the parameter.\n");

static PyObject *py_positive(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o;
    const char *name;
    double v;
    if (!PyArg_ParseTuple(args, "Os:positive", &o, &name) || to_real(o, name, &v) < 0)
        return NULL;
    if (sinpe_check_base(v) != SINPE_OK) {
        PyErr_Format(PyExc_ValueError, "%s must be finite and > 0, got %R", name, o);
        return NULL;
    }
    return PyFloat_FromDouble(v);
}

PyDoc_STRVAR(check_doc,
"check($module, opts, /)\n"
"--\n\n"
"Raises the core's exception for options that a call could not run with.\n");

static PyObject *py_check(PyObject *self, PyObject *arg)
{
    (void)self;
    call c;
    call_init(&c, "out", "rows", "cols");
    if (to_opts(arg, &c) < 0)
        return NULL;
    int64_t shape[2] = { 0, 2 };
    sinpe_job_init(&c.job, NULL, 2, shape, 10000.0);
    int st = sinpe_job_check(&c.job, &c.opts);
    if (st != SINPE_OK) {
        raise_status(st, &c);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *record_dict(const sinpe_record *r)
{
    return Py_BuildValue("{s:s,s:s,s:s,s:K,s:K,s:d,s:s}", "func", r->func, "cpu", r->cpu,
                         "date", r->date, "inputs", (unsigned long long)r->inputs, "wrong",
                         (unsigned long long)r->wrong, "seconds", r->seconds, "command",
                         r->command);
}

static PyObject *path_tuple(int p)
{
    PyObject *records = PyList_New(0);
    sinpe_record r;
    for (int k = 0; records && sinpe_path_record(p, k, &r); k++) {
        PyObject *d = record_dict(&r);
        if (!d || PyList_Append(records, d) < 0)
            Py_CLEAR(records);
        Py_XDECREF(d); /* (the list holds its own reference) */
    }
    if (!records)
        return NULL;
    return Py_BuildValue("(sOON)", sinpe_path_name(p), sinpe_path_available(p) ? Py_True : Py_False,
                         sinpe_path_verified(p) ? Py_True : Py_False, records);
}

PyDoc_STRVAR(registry_doc,
"registry($module, /)\n"
"--\n\n"
"The core's registries: {'backends': [(name, loadable, independent)], 'paths':\n"
"[(name, available, verified, records)], 'best_path': index, 'cpu': {vendor, features}};\n"
"indices are the options' values.\n");

static PyObject *py_registry(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyObject *backends = PyList_New(0), *paths = PyList_New(0), *cpu = PyDict_New(), *r = NULL;
    if (!backends || !paths || !cpu)
        goto out;
    for (int b = 0; b < sinpe_backend_count(); b++) {
        PyObject *t = Py_BuildValue("(sOO)", sinpe_backend_name(b),
                                    sinpe_backend_loadable(b) ? Py_True : Py_False,
                                    sinpe_backend_independent(b) ? Py_True : Py_False);
        if (!t || PyList_Append(backends, t) < 0) {
            Py_XDECREF(t);
            goto out;
        }
        Py_DECREF(t);
    }
    for (int p = 0; p < sinpe_path_count(); p++) {
        PyObject *t = path_tuple(p);
        if (!t || PyList_Append(paths, t) < 0) {
            Py_XDECREF(t);
            goto out;
        }
        Py_DECREF(t);
    }
    PyObject *v = PyUnicode_FromString(sinpe_cpu_vendor());
    if (!v || PyDict_SetItemString(cpu, "vendor", v) < 0) {
        Py_XDECREF(v);
        goto out;
    }
    Py_DECREF(v);
    int value;
    const char *name;
    for (int k = 0; (name = sinpe_cpu_feature(k, &value)) != NULL; k++)
        if (PyDict_SetItemString(cpu, name, value ? Py_True : Py_False) < 0)
            goto out;
    r = Py_BuildValue("{s:O,s:O,s:i,s:O}", "backends", backends, "paths", paths, "best_path",
                      sinpe_path_best(), "cpu", cpu);
out:
    Py_XDECREF(backends);
    Py_XDECREF(paths);
    Py_XDECREF(cpu);
    return r;
}

PyDoc_STRVAR(load_doc,
"load($module, backend, path, /)\n"
"--\n\n"
"Load backend (an index)'s library from path, once per process (the package serializes\n"
"loads).  Raises OSError with the reason on failure.\n");

static PyObject *py_load(PyObject *self, PyObject *args)
{
    (void)self;
    int b;
    PyObject *bytes;
    if (!PyArg_ParseTuple(args, "iO&:load", &b, PyUnicode_FSConverter, &bytes))
        return NULL;
    char msg[512];
    int st;
    const char *path = PyBytes_AS_STRING(bytes);
    Py_BEGIN_ALLOW_THREADS
    st = sinpe_backend_load(b, path, msg, sizeof msg);
    Py_END_ALLOW_THREADS
    Py_DECREF(bytes);
    if (st != SINPE_OK) {
        PyErr_Format(PyExc_OSError, "%s (backend %s)", msg,
                     sinpe_backend_name(b) ? sinpe_backend_name(b) : "?");
        return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(backend_info_doc,
"backend_info($module, backend, /)\n"
"--\n\n"
"None when backend (an index) cannot run now, else a dict with its library's version text\n"
"and mkl_rt's threading layer (1 = sequential; -1 for none).\n");

static PyObject *py_backend_info(PyObject *self, PyObject *arg)
{
    (void)self;
    long b = PyLong_AsLong(arg);
    if (b == -1 && PyErr_Occurred())
        return NULL;
    if (b < 0 || b >= sinpe_backend_count() || !sinpe_backend_ready((int)b))
        Py_RETURN_NONE;
    return Py_BuildValue("{s:s,s:i}", "version", sinpe_backend_version((int)b), "threading_layer",
                         sinpe_backend_threading_layer((int)b));
}

PyDoc_STRVAR(admit_doc,
"admit($module, shape, dtype, noun, /)\n"
"--\n\n"
"The core's memory rule for an array about to be made (a preset's result or inputs):\n"
"OverflowError past what memory can address, MemoryError past this machine's memory, with\n"
"the figures; noun names it in the message.\n");

static PyObject *py_admit(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o_shape, *o_dtype;
    const char *noun;
    if (!PyArg_ParseTuple(args, "O!O!s:admit", &PyTuple_Type, &o_shape, &PyArrayDescr_Type,
                          &o_dtype, &noun))
        return NULL;
    sinpe_array a;
    memset(&a, 0, sizeof a);
    if (type_of((PyArray_Descr *)o_dtype, &a.type) != 0 || PyTuple_GET_SIZE(o_shape) > SINPE_MAX_DIMS) {
        PyErr_SetString(PyExc_TypeError, "admit: a shape of at most 64 axes and a known dtype");
        return NULL;
    }
    a.ndim = (int)PyTuple_GET_SIZE(o_shape);
    for (int k = 0; k < a.ndim; k++)
        if (to_int64(PyTuple_GET_ITEM(o_shape, k), "shape", &a.shape[k]) < 0)
            return NULL;
    sinpe_need n;
    int st = sinpe_admit(a.ndim, a.shape, a.type, 0, &n);
    if (st == SINPE_E_MEMORY) {
        raise_memory_of(noun, &a, &n);
        return NULL;
    }
    if (st != SINPE_OK) {
        PyObject *shape = shape_tuple(a.ndim, a.shape);
        if (shape)
            PyErr_Format(PyExc_OverflowError, "%s of shape %R (%s) is larger than memory can "
                         "address", noun, shape, TYPE_NAMES[a.type]);
        Py_XDECREF(shape);
        return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(physical_memory_doc,
"physical_memory($module, /)\n"
"--\n\n"
"This machine's physical memory in bytes, the memory rule's figure (0: unknown).\n");

static PyObject *py_physical_memory(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromLongLong((long long)sinpe_physical_memory());
}

static PyMethodDef methods[] = {
    { "adopt_openmp", py_adopt_openmp, METH_O, adopt_openmp_doc },
    { "openmp_adopted", py_openmp_adopted, METH_NOARGS, openmp_adopted_doc },
    { "tensor_route", py_tensor_route, METH_VARARGS, tensor_route_doc },
    { "physical_memory", py_physical_memory, METH_NOARGS, physical_memory_doc },
    { "admit", py_admit, METH_VARARGS, admit_doc },
    { "table", (PyCFunction)(void (*)(void))py_table, METH_FASTCALL | METH_KEYWORDS, table_doc },
    { "add", (PyCFunction)(void (*)(void))py_add, METH_FASTCALL | METH_KEYWORDS, add_doc },
    { "rope", (PyCFunction)(void (*)(void))py_rope, METH_FASTCALL | METH_KEYWORDS, rope_doc },
    { "map", py_map, METH_VARARGS, map_doc },
    { "freqs", (PyCFunction)(void (*)(void))py_freqs, METH_FASTCALL | METH_KEYWORDS, freqs_doc },
    { "round", py_round, METH_VARARGS, round_doc },
    { "check", py_check, METH_O, check_doc },
    { "add_held", (PyCFunction)(void (*)(void))py_add_held, METH_FASTCALL, add_held_doc },
    { "positive", py_positive, METH_VARARGS, positive_doc },
    { "registry", py_registry, METH_NOARGS, registry_doc },
    { "load", py_load, METH_VARARGS, load_doc },
    { "backend_info", py_backend_info, METH_O, backend_info_doc },
    { NULL, NULL, 0, NULL },
};

/* A tuple of the names n(0) .. n(count - 1). */
static PyObject *names_tuple(int count, const char *(*n)(int))
{
    PyObject *t = PyTuple_New(count);
    for (int i = 0; t && i < count; i++) {
        PyObject *v = PyUnicode_FromString(n(i));
        if (!v) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

/* BACKENDS and PATHS: the core's names by index (the one list of each, backends/backend.h
 * and paths/path.h), for the package to read instead of repeating them. */
static int module_exec(PyObject *m)
{
    import_array1(-1);
    PyObject *b = names_tuple(sinpe_backend_count(), sinpe_backend_name);
    if (!b || PyModule_AddObject(m, "BACKENDS", b) < 0) {
        Py_XDECREF(b);
        return -1;
    }
    PyObject *p = names_tuple(sinpe_path_count(), sinpe_path_name);
    if (!p || PyModule_AddObject(m, "PATHS", p) < 0) {
        Py_XDECREF(p);
        return -1;
    }
    return 0;
}

static PyModuleDef_Slot slots[] = {
    { Py_mod_exec, (void *)module_exec },
    { 0, NULL },
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_sinpe", "The CPython / NumPy binding of sinpe's C core.",
    sizeof(tensor_route), methods, slots, module_traverse, module_clear, module_free,
};

PyMODINIT_FUNC PyInit__sinpe(void)
{
    return PyModuleDef_Init(&moduledef);
}
