/* Backends: whose exp, sin, cos and pow a job runs (backends layer, pure C).
 *
 * One table of operations per backend, each in its own file (backends/builtin.c, vml.c,
 * sleef.c), all registered in backends/registry.c.  The engine calls a backend only
 * through this table and a narrow context: the code path of the built-in kernels, the SLEEF
 * profile, and the tensor torch would have evaluated in one call, whose element order
 * decides SLEEF's vectors (its length, and a function giving any element's argument).
 */
#ifndef SINPE_BACKENDS_BACKEND_H
#define SINPE_BACKENDS_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "paths/path.h"

typedef struct {
    const sinpe_path_ops *path; /* the built-in kernels' code path */
    int trig, lanes;            /* SLEEF: u10 (0) or u35 (1) sin/cos, 4 or 8 lanes; a
                                   framework's profile variant in trig (frameworks.c) */
    int torch_threads;          /* SLEEF and pow: torch's thread count */
    int pow_lanes;              /* x86-64 torch's float32 vector width for pow (0: DEFAULT) */
    int64_t tensor_len;         /* elements of the tensor torch evaluates in one call */
    int64_t exp_len;            /* elements of the tensor exp is evaluated over in one call */
    int exp_ndim;               /* that tensor's rank (XLA leaves a short exp's tail to the C
                                   library for vectors only) */
    int64_t exp_last;           /* that tensor's last axis: its rows' length (JAX 0.5-0.7) */
    float (*argument)(const void *src, int64_t element); /* that tensor's element */
    const void *src;
} sinpe_bctx;

typedef struct {
    /* 1: a result depends on its argument alone, so equal arguments may be computed once
     * and arrays cut anywhere (0: SLEEF, whose vectors couple lanes) */
    int independent;
    /* the library: load it from path (0, or -1 with the reason in msg), whether it is
     * loaded, its version text and mkl_rt's threading layer; NULL for none */
    int (*load)(const char *path, char *msg, size_t msglen);
    int (*ready)(void);
    const char *(*version)(void);
    int (*threading_layer)(void);
    /* 0 when the context's parameters suit this backend */
    int (*check)(const sinpe_bctx *ctx);
    /* exp of n arguments that are elements e0 .. e0+n-1 of exp's tensor (exp_len elements:
     * the frameworks send an op's last elements to their C library) */
    void (*exp)(const sinpe_bctx *ctx, int64_t e0, const float *in, float *out, size_t n);
    /* sin and cos of n arguments that are elements e0 .. e0+n-1 of the tensor (s or c NULL:
     * not wanted) */
    void (*sincos)(const sinpe_bctx *ctx, int64_t e0, const float *a, float *s, float *c,
                   size_t n);
    /* table rows (paths' rows contract) computed in one pass; NULL: the engine forms the
     * angles and calls sincos */
    void (*rows)(const sinpe_bctx *ctx, float *out, ptrdiff_t ostride, const float *pos,
                 int64_t first_row, int64_t nrows, const float *div, int64_t half, float dmin,
                 float dmax);
    /* out[i] = base ** y[i] for elements e0 .. e0+n-1 of the tensor (out may be y) */
    void (*pow)(const sinpe_bctx *ctx, float base, const float *y, float *out, int64_t e0,
                int64_t n);
} sinpe_backend_ops;

/* A backend with no library to load (builtin, sleef, the frameworks) is always ready. */
static inline int sinpe_backend_no_library(void)
{
    return 1;
}

/* The table of such a backend (backends/vml.c writes its own, with the library's load,
 * version and threading layer); rows_fn NULL: the engine forms the angles. */
#define SINPE_BACKEND_OPS(indep, check_fn, exp_fn, sincos_fn, rows_fn, pow_fn)               \
    {                                                                                        \
        .independent = (indep),                                                              \
        .ready = sinpe_backend_no_library,                                                   \
        .check = (check_fn),                                                                 \
        .exp = (exp_fn),                                                                     \
        .sincos = (sincos_fn),                                                               \
        .rows = (rows_fn),                                                                   \
        .pow = (pow_fn),                                                                     \
    }

/* The registry (backends/registry.c). */
/* The backends by index: the one list of their names (the registry, the public API and,
 * through the binding's BACKENDS, the package read it). */
#define SINPE_BACKEND_LIST(X) X(BUILTIN, "builtin") X(MKL, "mkl") X(TORCH, "torch") X(SLEEF, "sleef") \
    X(NUMPY, "numpy") X(TENSORFLOW, "tensorflow") X(JAX, "jax") X(ONNXRUNTIME, "onnxruntime") \
    X(MLX, "mlx")
#define SINPE_BACKEND_ENUM_(id, name) SINPE_BACKEND_##id,
enum { SINPE_BACKEND_LIST(SINPE_BACKEND_ENUM_) SINPE_BACKEND_COUNT };

int sinpe_backends_count(void);
const sinpe_backend_ops *sinpe_backends_get(int b); /* NULL outside 0 .. count-1 */
const char *sinpe_backends_name(int b);             /* NULL outside 0 .. count-1 */

/* The SLEEF backend's grouping (backends/sleef.c), for tools and tests: torch's
 * at::parallel_for chunk of an n-element op at `threads` threads (grain 2048). */
int64_t sinpe_sleef_chunk(int64_t n, int threads);

#endif
