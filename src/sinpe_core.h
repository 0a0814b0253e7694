/* sinpe core: sinusoidal positional-encoding tables in float32.
 *
 * Pure C (no Python headers).  Every function fills caller-owned buffers and
 * returns a status code; nothing aborts.  The numerics follow the reference
 * PyTorch module step by step (see README "Numerics"):
 *   c        = (float)(-log(base) / d_model)         (double log, then float)
 *   div[i]   = exp((float)(2i) * c)                  (float multiply, float exp)
 *   angle    = (float)pos * div[i]                   (float multiply)
 *   pe[pos, 2i] = sin(angle), pe[pos, 2i+1] = cos(angle)
 * with exp/sin/cos from the selected backend.
 */
#ifndef SINPE_CORE_H
#define SINPE_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    SINPE_OK = 0,
    SINPE_E_DMODEL = 1,   /* d_model odd or < 2 */
    SINPE_E_MAXLEN = 2,   /* max_len / seq_len < 0 */
    SINPE_E_BASE = 3,     /* base not finite or <= 0 */
    SINPE_E_OFFSET = 4,   /* offset < 0, or offset + len overflows */
    SINPE_E_SIZE = 5,     /* element count overflows size_t */
    SINPE_E_NOMEM = 6,    /* a scratch allocation failed */
    SINPE_E_BACKEND = 7,  /* backend unknown or not loaded */
    SINPE_E_NULL = 8,     /* NULL buffer with a nonzero size */
    SINPE_E_LOAD = 9,     /* the oneMKL library could not be loaded */
    SINPE_E_KERNEL = 10   /* kernel path unknown or not supported here */
} sinpe_status;

typedef enum {
    SINPE_BACKEND_BUILTIN = 0, /* correctly rounded kernels, no dependency */
    SINPE_BACKEND_MKL = 1,     /* oneMKL VML HA, loaded at run time */
    SINPE_BACKEND_COUNT = 2
} sinpe_backend;

typedef enum {
    SINPE_KERNEL_SCALAR = 0, /* portable C */
    SINPE_KERNEL_AVX2 = 1,   /* x86-64 AVX2 + FMA */
    SINPE_KERNEL_NEON = 2,   /* AArch64 Advanced SIMD */
    SINPE_KERNEL_COUNT = 3
} sinpe_kernel;

/* Per-call options.  threads <= 1 runs on the calling thread only. */
typedef struct {
    sinpe_backend backend;
    sinpe_kernel kernel; /* built-in backend's code path */
    int threads;
} sinpe_opts;

/* 1 when this build and this CPU can run the kernel path. */
int sinpe_kernel_available(sinpe_kernel k);
/* The fastest available path (probed once per call of this function). */
sinpe_kernel sinpe_kernel_best(void);
const char *sinpe_kernel_name(sinpe_kernel k);

/* Human-readable text of a status code (static storage). */
const char *sinpe_strerror(int status);

/* Checks the common arguments; SINPE_OK when they are valid. */
int sinpe_check_args(int64_t rows, int64_t d_model, double base);

/* out[0 .. max_len*d_model): the table, row-major (max_len, d_model). */
int sinpe_table(float *out, int64_t max_len, int64_t d_model, double base,
                const sinpe_opts *opts);

/* out[0 .. n*d_model): row r is the encoding of position positions[r] (any
 * float: negative, fractional), or of first_row + r when positions is NULL
 * (first_row >= 0; used to fill a table in pieces). */
int sinpe_table_at(float *out, const float *positions, int64_t first_row, int64_t n,
                   int64_t d_model, double base, const sinpe_opts *opts);

/* Adds rows offset .. offset+len-1 of the table to x in place.  x holds
 * nbatch blocks of len rows of d_model contiguous floats; row r of block b
 * starts at x + b*batch_stride + r*row_stride (strides in floats, any sign).
 * The caller guarantees the rows do not overlap. */
int sinpe_add(float *x, int64_t nbatch, int64_t len, int64_t d_model,
              ptrdiff_t batch_stride, ptrdiff_t row_stride, int64_t offset,
              double base, const sinpe_opts *opts);

/* Elementwise kernels of a backend (for tests and tools): func 0 exp, 1 sin,
 * 2 cos; n elements from in to out. */
int sinpe_map(int func, const float *in, float *out, size_t n, const sinpe_opts *opts);

/* oneMKL backend (sinpe_mkl.c).  Loads the oneMKL runtime library at path
 * (dlopen / LoadLibrary), selects its sequential threading layer and LP64
 * interface, resolves vmsExp/vmsSin/vmsCos and warms them up once.  On
 * failure, msg receives the reason.  Not thread-safe: call once, early. */
int sinpe_mkl_load(const char *path, char *msg, size_t msglen);
int sinpe_mkl_loaded(void);
/* The library's own version string ("" when not loaded). */
const char *sinpe_mkl_version(void);
/* The threading layer MKL reported after the request for sequential. */
int sinpe_mkl_threading_layer(void);

#ifdef __cplusplus
}
#endif
#endif
