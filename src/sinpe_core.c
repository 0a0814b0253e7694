/* sinpe core: table fill and in-place add over a selectable backend, kernel
 * path and thread count.  Entry point of the pure-C core (sinpe_core.h). */
#include "sinpe_core.h"
#include "sinpe_cpu.h"
#include "sinpe_kernels.h"
#include "sinpe_mkl.h"
#include "sinpe_threads.h"

#include <math.h>
#include <stdlib.h>

/* Angles are processed in blocks of this many (oneMKL calls, divisors,
 * elementwise): at most three float arrays on the stack (24 KiB), no
 * allocation. */
#define SINPE_BLOCK 2048
/* Work per thread at least this many angles, so small calls stay serial. */
#define SINPE_MIN_CHUNK_ANGLES 32768
/* add_pe computes PE rows in chunks of about this many floats per thread. */
#define SINPE_ADD_CHUNK_FLOATS 8192

const char *sinpe_strerror(int status)
{
    switch (status) {
    case SINPE_OK: return "ok";
    case SINPE_E_DMODEL: return "d_model must be an even integer >= 2";
    case SINPE_E_MAXLEN: return "the number of rows must be >= 0";
    case SINPE_E_BASE: return "base must be finite and > 0";
    case SINPE_E_OFFSET: return "offset must be >= 0 and offset + seq_len must fit in int64";
    case SINPE_E_SIZE: return "the table has more elements than memory can address";
    case SINPE_E_NOMEM: return "out of memory for scratch space";
    case SINPE_E_BACKEND: return "backend unknown or not loaded";
    case SINPE_E_NULL: return "NULL buffer";
    case SINPE_E_LOAD: return "the oneMKL library could not be loaded";
    case SINPE_E_KERNEL: return "kernel path unknown or not supported on this CPU";
    default: return "unknown sinpe status";
    }
}

/* ---- kernel paths ------------------------------------------------------- */

int sinpe_kernel_available(sinpe_kernel k)
{
    if (k == SINPE_KERNEL_SCALAR)
        return 1;
#ifdef SINPE_HAVE_AVX2_KERNEL
    if (k == SINPE_KERNEL_AVX2)
        return sinpe_cpu_has_avx2_fma();
#endif
#ifdef SINPE_HAVE_NEON_KERNEL
    if (k == SINPE_KERNEL_NEON)
        return 1;
#endif
    return 0;
}

sinpe_kernel sinpe_kernel_best(void)
{
    if (sinpe_kernel_available(SINPE_KERNEL_AVX2))
        return SINPE_KERNEL_AVX2;
    if (sinpe_kernel_available(SINPE_KERNEL_NEON))
        return SINPE_KERNEL_NEON;
    return SINPE_KERNEL_SCALAR;
}

const char *sinpe_kernel_name(sinpe_kernel k)
{
    switch (k) {
    case SINPE_KERNEL_SCALAR: return "scalar";
    case SINPE_KERNEL_AVX2: return "avx2";
    case SINPE_KERNEL_NEON: return "neon";
    default: return "unknown";
    }
}

void sinpe_rows_scalar(float *out, const float *positions, int64_t first_row, int64_t nrows,
                       const float *div, int64_t half)
{
    for (int64_t r = 0; r < nrows; r++) {
        float pos = positions ? positions[r] : (float)(first_row + r);
        float *dst = out + r * 2 * half;
        for (int64_t j = 0; j < half; j++)
            sinpe_sincosf(pos * div[j], &dst[2 * j], &dst[2 * j + 1]);
    }
}

void sinpe_sincos_scalar(const float *a, float *s, float *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sinpe_sincosf(a[i], &s[i], &c[i]);
}

static sinpe_rows_fn rows_fn(sinpe_kernel k)
{
#ifdef SINPE_HAVE_AVX2_KERNEL
    if (k == SINPE_KERNEL_AVX2)
        return sinpe_rows_avx2;
#endif
#ifdef SINPE_HAVE_NEON_KERNEL
    if (k == SINPE_KERNEL_NEON)
        return sinpe_rows_neon;
#endif
    (void)k;
    return sinpe_rows_scalar;
}

static sinpe_sincos_fn sincos_fn(sinpe_kernel k)
{
#ifdef SINPE_HAVE_AVX2_KERNEL
    if (k == SINPE_KERNEL_AVX2)
        return sinpe_sincos_avx2;
#endif
#ifdef SINPE_HAVE_NEON_KERNEL
    if (k == SINPE_KERNEL_NEON)
        return sinpe_sincos_neon;
#endif
    (void)k;
    return sinpe_sincos_scalar;
}

/* ---- argument checks ------------------------------------------------------ */

int sinpe_check_args(int64_t rows, int64_t d_model, double base)
{
    if (d_model < 2 || d_model % 2 != 0)
        return SINPE_E_DMODEL;
    if (rows < 0)
        return SINPE_E_MAXLEN;
    if (!isfinite(base) || !(base > 0.0))
        return SINPE_E_BASE;
    /* rows * d_model floats must be addressable (and indexable by ptrdiff_t). */
    int64_t limit = (int64_t)((PTRDIFF_MAX < SIZE_MAX ? (uint64_t)PTRDIFF_MAX : (uint64_t)SIZE_MAX)
                              / sizeof(float));
    if (rows > limit / d_model)
        return SINPE_E_SIZE;
    return SINPE_OK;
}

static int check_opts(const sinpe_opts *o)
{
    if (!o)
        return SINPE_E_NULL;
    if (o->backend == SINPE_BACKEND_MKL)
        return sinpe_mkl_loaded() ? SINPE_OK : SINPE_E_BACKEND;
    if (o->backend != SINPE_BACKEND_BUILTIN)
        return SINPE_E_BACKEND;
    return (o->kernel >= 0 && o->kernel < SINPE_KERNEL_COUNT && sinpe_kernel_available(o->kernel))
               ? SINPE_OK
               : SINPE_E_KERNEL;
}

/* ---- elementwise ------------------------------------------------------------ */

int sinpe_map(int func, const float *in, float *out, size_t n, const sinpe_opts *o)
{
    int st = check_opts(o);
    if (st != SINPE_OK)
        return st;
    if (func < 0 || func > 2)
        return SINPE_E_BACKEND;
    if (n && (!in || !out))
        return SINPE_E_NULL;
    if (o->backend == SINPE_BACKEND_MKL)
        return sinpe_mkl_map(func, in, out, n);
    if (func == 0) {
        for (size_t i = 0; i < n; i++)
            out[i] = sinpe_expf(in[i]);
        return SINPE_OK;
    }
    /* sin or cos through the block sincos of the kernel path, so that tests
     * of this function exercise the path the tables use */
    sinpe_sincos_fn sincos = sincos_fn(o->kernel);
    float other[SINPE_BLOCK];
    for (size_t i0 = 0; i0 < n; i0 += SINPE_BLOCK) {
        size_t m = n - i0 < SINPE_BLOCK ? n - i0 : SINPE_BLOCK;
        float *s = func == 1 ? out + i0 : other, *c = func == 2 ? out + i0 : other;
        sincos(in + i0, s, c, m);
    }
    return SINPE_OK;
}

/* ---- tables ------------------------------------------------------------------ */

/* div[i] = exp((float)(2i) * (float)(-log(base) / d_model)), i < d_model/2. */
static void fill_div(float *div, int64_t d_model, double base, sinpe_backend be)
{
    float c = (float)(-log(base) / (double)d_model);
    int64_t half = d_model / 2;
    float arg[SINPE_BLOCK];
    for (int64_t i0 = 0; i0 < half; i0 += SINPE_BLOCK) {
        size_t n = (size_t)(half - i0 < SINPE_BLOCK ? half - i0 : SINPE_BLOCK);
        for (size_t i = 0; i < n; i++)
            arg[i] = (float)(2 * (i0 + (int64_t)i)) * c;
        if (be == SINPE_BACKEND_MKL) {
            sinpe_mkl_map(0, arg, div + i0, n);
        } else {
            for (size_t i = 0; i < n; i++)
                div[i0 + (int64_t)i] = sinpe_expf(arg[i]);
        }
    }
}

/* dst[2i] = s[i], dst[2i+1] = c[i] for i < n. */
static void interleave(const float *s, const float *c, float *dst, size_t n, sinpe_kernel k)
{
#ifdef SINPE_HAVE_AVX2_KERNEL
    if (k == SINPE_KERNEL_AVX2) {
        sinpe_interleave_avx2(s, c, dst, n);
        return;
    }
#endif
    (void)k;
    for (size_t i = 0; i < n; i++) {
        dst[2 * i] = s[i];
        dst[2 * i + 1] = c[i];
    }
}

/* oneMKL rows: the (row, column) pairs are walked as one flat sequence in
 * blocks, so narrow tables still make full calls. */
static void mkl_rows(float *out, const float *positions, int64_t first_row, int64_t nrows,
                     const float *div, int64_t half, sinpe_kernel k)
{
    float a[SINPE_BLOCK], s[SINPE_BLOCK], c[SINPE_BLOCK];
    int64_t total = nrows * half;
    int64_t row = 0, col = 0;
    for (int64_t e0 = 0; e0 < total; e0 += SINPE_BLOCK) {
        size_t n = (size_t)(total - e0 < SINPE_BLOCK ? total - e0 : SINPE_BLOCK);
        for (size_t i = 0; i < n;) { /* a run of one row at a time */
            size_t run = (size_t)(half - col) < n - i ? (size_t)(half - col) : n - i;
            float pos = positions ? positions[row] : (float)(first_row + row);
            const float *dv = div + col;
            for (size_t r = 0; r < run; r++)
                a[i + r] = pos * dv[r];
            i += run;
            col += (int64_t)run;
            if (col == half) {
                col = 0;
                row++;
            }
        }
        sinpe_mkl_map(1, a, s, n);
        sinpe_mkl_map(2, a, c, n);
        interleave(s, c, out + 2 * e0, n, k);
    }
}

static void fill_rows(const sinpe_opts *o, float *out, const float *pos, int64_t first_row,
                      int64_t nrows, const float *div, int64_t half)
{
    if (o->backend == SINPE_BACKEND_MKL)
        mkl_rows(out, pos, first_row, nrows, div, half, o->kernel);
    else
        rows_fn(o->kernel)(out, pos, first_row, nrows, div, half);
}

static int64_t min_rows_per_thread(int64_t half)
{
    int64_t r = SINPE_MIN_CHUNK_ANGLES / half;
    return r > 0 ? r : 1;
}

typedef struct {
    const sinpe_opts *o;
    float *out;
    const float *pos; /* NULL: rows first_row, first_row + 1, ... */
    const float *div;
    int64_t half, first_row;
} table_job;

static void table_task(void *ctx, int64_t begin, int64_t end, int tid)
{
    (void)tid;
    table_job *j = ctx;
    fill_rows(j->o, j->out + begin * 2 * j->half, j->pos ? j->pos + begin : NULL,
              j->first_row + begin, end - begin, j->div, j->half);
}

int sinpe_table(float *out, int64_t max_len, int64_t d_model, double base, const sinpe_opts *o)
{
    return sinpe_table_at(out, NULL, 0, max_len, d_model, base, o);
}

int sinpe_table_at(float *out, const float *positions, int64_t first_row, int64_t max_len,
                   int64_t d_model, double base, const sinpe_opts *o)
{
    int st = sinpe_check_args(max_len, d_model, base);
    if (st == SINPE_OK)
        st = check_opts(o);
    if (st != SINPE_OK)
        return st;
    if (first_row < 0 || first_row > INT64_MAX - max_len)
        return SINPE_E_OFFSET;
    if (max_len == 0)
        return SINPE_OK;
    if (!out)
        return SINPE_E_NULL;
    int64_t half = d_model / 2;
    float *div = malloc((size_t)half * sizeof(float));
    if (!div)
        return SINPE_E_NOMEM;
    fill_div(div, d_model, base, o->backend);
    table_job job = { o, out, positions, div, half, first_row };
    sinpe_parallel_for(max_len, min_rows_per_thread(half), o->threads, table_task, &job);
    free(div);
    return SINPE_OK;
}

/* ---- add ------------------------------------------------------------------------ */

typedef struct {
    const sinpe_opts *o;
    float *x;
    int64_t nbatch, d_model, offset, chunk;
    ptrdiff_t batch_stride, row_stride;
    const float *div;
    float *scratch; /* chunk * d_model floats per thread */
} add_job;

static void add_rows(float *restrict xr, const float *restrict pr, int64_t d, sinpe_kernel k)
{
#ifdef SINPE_HAVE_AVX2_KERNEL
    if (k == SINPE_KERNEL_AVX2) {
        sinpe_add_avx2(xr, pr, d);
        return;
    }
#endif
    (void)k;
    for (int64_t j = 0; j < d; j++)
        xr[j] += pr[j];
}

/* Rows [begin, end) of x: each PE row is computed once, in chunks, and added
 * to every batch element. */
static void add_task(void *ctx, int64_t begin, int64_t end, int tid)
{
    add_job *j = ctx;
    int64_t d = j->d_model;
    float *pe = j->scratch + (ptrdiff_t)tid * j->chunk * d;
    for (int64_t r0 = begin; r0 < end; r0 += j->chunk) {
        int64_t nr = end - r0 < j->chunk ? end - r0 : j->chunk;
        fill_rows(j->o, pe, NULL, j->offset + r0, nr, j->div, d / 2);
        for (int64_t b = 0; b < j->nbatch; b++)
            for (int64_t r = 0; r < nr; r++)
                add_rows(j->x + (ptrdiff_t)b * j->batch_stride + (ptrdiff_t)(r0 + r) * j->row_stride,
                         pe + r * d, d, j->o->kernel);
    }
}

int sinpe_add(float *x, int64_t nbatch, int64_t len, int64_t d_model,
              ptrdiff_t batch_stride, ptrdiff_t row_stride, int64_t offset,
              double base, const sinpe_opts *o)
{
    int st = sinpe_check_args(len, d_model, base);
    if (st == SINPE_OK)
        st = check_opts(o);
    if (st != SINPE_OK)
        return st;
    if (nbatch < 0)
        return SINPE_E_MAXLEN;
    if (offset < 0 || offset > INT64_MAX - len)
        return SINPE_E_OFFSET;
    if (len == 0 || nbatch == 0)
        return SINPE_OK;
    if (!x)
        return SINPE_E_NULL;
    add_job job = { o, x, nbatch, d_model, offset, 0, batch_stride, row_stride, NULL, NULL };
    job.chunk = SINPE_ADD_CHUNK_FLOATS / d_model > 0 ? SINPE_ADD_CHUNK_FLOATS / d_model : 1;
    if (job.chunk > len)
        job.chunk = len;
    int64_t per_thread = min_rows_per_thread(d_model / 2) / nbatch;
    if (per_thread < job.chunk)
        per_thread = job.chunk;
    int t = sinpe_parallel_count(len, per_thread, o->threads);
    /* All scratch is taken before anything is written: on failure x is
     * untouched.  O(threads x chunk) floats, plus the d_model/2 divisors. */
    size_t half = (size_t)(d_model / 2);
    float *mem = malloc((half + (size_t)t * (size_t)(job.chunk * d_model)) * sizeof(float));
    if (!mem)
        return SINPE_E_NOMEM;
    job.div = mem;
    job.scratch = mem + half;
    fill_div(mem, d_model, base, o->backend);
    sinpe_parallel_for(len, per_thread, o->threads, add_task, &job);
    free(mem);
    return SINPE_OK;
}
