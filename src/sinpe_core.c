/* sinpe core: table fill and in-place add, over a selectable backend.
 * Entry point of the pure-C core (see sinpe_core.h). */
#include "sinpe_core.h"
#include "sinpe_kernels.h"
#include "sinpe_mkl.h"

#include <math.h>
#include <stdlib.h>

/* Angles are processed in blocks of this many values: three float arrays on
 * the stack (6 KiB), no allocation. */
#define SINPE_BLOCK 512

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
    default: return "unknown sinpe status";
    }
}

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

static int backend_ok(sinpe_backend be)
{
    if (be == SINPE_BACKEND_BUILTIN)
        return 1;
    if (be == SINPE_BACKEND_MKL)
        return sinpe_mkl_loaded();
    return 0;
}

static void builtin_map(int func, const float *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = in[i];
        out[i] = func == 0 ? sinpe_expf(x) : func == 1 ? sinpe_sinf(x) : sinpe_cosf(x);
    }
}

int sinpe_map(int func, const float *in, float *out, size_t n, sinpe_backend be)
{
    if (func < 0 || func > 2 || !backend_ok(be))
        return SINPE_E_BACKEND;
    if (n && (!in || !out))
        return SINPE_E_NULL;
    if (be == SINPE_BACKEND_MKL)
        return sinpe_mkl_map(func, in, out, n);
    builtin_map(func, in, out, n);
    return SINPE_OK;
}

/* s[i] = sin(a[i]), c[i] = cos(a[i]) for i < n <= SINPE_BLOCK. */
static void sincos_block(sinpe_backend be, const float *a, float *s, float *c, size_t n)
{
    if (be == SINPE_BACKEND_MKL) {
        sinpe_mkl_map(1, a, s, n);
        sinpe_mkl_map(2, a, c, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        sinpe_sincosf(a[i], &s[i], &c[i]);
}

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
        if (be == SINPE_BACKEND_MKL)
            sinpe_mkl_map(0, arg, div + i0, n);
        else
            builtin_map(0, arg, div + i0, n);
    }
}

/* Rows first_row .. first_row+nrows-1 of the table into out (contiguous,
 * nrows * 2*half floats).  The (row, column) pairs are walked as one flat
 * sequence, so narrow tables still make full blocks. */
static void fill_rows(float *out, int64_t first_row, int64_t nrows, int64_t half,
                      const float *div, sinpe_backend be)
{
    float a[SINPE_BLOCK], s[SINPE_BLOCK], c[SINPE_BLOCK];
    int64_t total = nrows * half;
    int64_t row = first_row, col = 0;
    float pos = (float)row;
    for (int64_t e0 = 0; e0 < total; e0 += SINPE_BLOCK) {
        size_t n = (size_t)(total - e0 < SINPE_BLOCK ? total - e0 : SINPE_BLOCK);
        for (size_t i = 0; i < n; i++) {
            a[i] = pos * div[col];
            if (++col == half) {
                col = 0;
                pos = (float)++row;
            }
        }
        sincos_block(be, a, s, c, n);
        float *dst = out + 2 * e0;
        for (size_t i = 0; i < n; i++) {
            dst[2 * i] = s[i];
            dst[2 * i + 1] = c[i];
        }
    }
}

int sinpe_table(float *out, int64_t max_len, int64_t d_model, double base, sinpe_backend be)
{
    int st = sinpe_check_args(max_len, d_model, base);
    if (st != SINPE_OK)
        return st;
    if (!backend_ok(be))
        return SINPE_E_BACKEND;
    if (max_len == 0)
        return SINPE_OK;
    if (!out)
        return SINPE_E_NULL;
    float *div = malloc((size_t)(d_model / 2) * sizeof(float));
    if (!div)
        return SINPE_E_NOMEM;
    fill_div(div, d_model, base, be);
    fill_rows(out, 0, max_len, d_model / 2, div, be);
    free(div);
    return SINPE_OK;
}

int sinpe_add(float *x, int64_t nbatch, int64_t len, int64_t d_model,
              ptrdiff_t batch_stride, ptrdiff_t row_stride, int64_t offset,
              double base, sinpe_backend be)
{
    int st = sinpe_check_args(len, d_model, base);
    if (st != SINPE_OK)
        return st;
    if (nbatch < 0)
        return SINPE_E_MAXLEN;
    if (offset < 0 || offset > INT64_MAX - len)
        return SINPE_E_OFFSET;
    if (!backend_ok(be))
        return SINPE_E_BACKEND;
    if (len == 0 || nbatch == 0)
        return SINPE_OK;
    if (!x)
        return SINPE_E_NULL;
    /* PE rows are computed once per chunk of rows and added to every batch
     * element: scratch of max(d_model, 4096) floats plus the divisors. */
    int64_t chunk = 4096 / d_model > 0 ? 4096 / d_model : 1;
    if (chunk > len)
        chunk = len;
    size_t half = (size_t)(d_model / 2);
    float *div = malloc((half + (size_t)(chunk * d_model)) * sizeof(float));
    if (!div)
        return SINPE_E_NOMEM;
    float *pe = div + half;
    fill_div(div, d_model, base, be);
    for (int64_t r0 = 0; r0 < len; r0 += chunk) {
        int64_t nr = len - r0 < chunk ? len - r0 : chunk;
        fill_rows(pe, offset + r0, nr, (int64_t)half, div, be);
        for (int64_t b = 0; b < nbatch; b++) {
            for (int64_t r = 0; r < nr; r++) {
                float *xr = x + (ptrdiff_t)b * batch_stride + (ptrdiff_t)(r0 + r) * row_stride;
                const float *pr = pe + r * d_model;
                for (int64_t j = 0; j < d_model; j++)
                    xr[j] += pr[j];
            }
        }
    }
    free(div);
    return SINPE_OK;
}
