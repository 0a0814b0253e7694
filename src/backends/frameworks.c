/* The frameworks' backends: 'numpy', 'tensorflow', 'jax' and 'onnxruntime', each the float32
 * exp, sin, cos and pow that framework runs on x86-64 CPUs, applied to the same operations
 * (docs/backends.md).  The element functions are elem/fw_*.c and elem/glibcf.c; what this
 * file adds is each framework's rule for which elements of an op's output take its C
 * library instead of its vector kernel (a scalar tail at the end of the tensor):
 *
 *   numpy (NumPy 2.1 to 2.4; 1.26 and 2.0 with ctx->trig = 1: their older sin/cos): exp,
 *     sin, cos are NumPy's own SIMD loops (masked loads: no tail;
 *     their large and infinite lanes call glibc, inside the model); pow here is glibc's
 *     powf (NumPy on AVX2), but NumPy picks Intel SVML's on AVX-512, so the package
 *     computes the 'numpy' backend's pow step with the installed NumPy itself
 *     (sinpe/_jobs.py: numpy_pow) and this one is not used by the presets.
 *   tensorflow (2.21): Eigen's psin/pcos/pexp under FTZ/DAZ; the last n % 8 elements of
 *     each op's n are Eigen's scalar path, std::sin/cos/exp (glibc) under FTZ/DAZ (expf's
 *     subnormal results flushed; sinf keeps a subnormal argument).  pow: Eigen's float pow
 *     (elem/fw_eigen_pow.c) under FTZ/DAZ, its last n % 8 elements glibc's powf under
 *     FTZ/DAZ, flushed.  The profile of TensorFlow 2.15 to 2.19 (ctx->trig = 1): the older
 *     Eigen's pow (elem/fw_eigen219_pow.c), the same tail.
 *   jax (0.9, 0.10): XLA's exp (FTZ/DAZ), but an exp of 3, 5 to 7, 11 or 13 to 15 elements
 *     leaves its last n % 8 to glibc; sin, cos: glibc's sinf/cosf; pow: glibc's powf under
 *     FTZ/DAZ.  The profile of JAX 0.8 (ctx->trig = 1): no such tail, every element XLA's;
 *     of JAX 0.5 to 0.7 (ctx->trig = 2): two elements of some long rows (jax07_glibc).
 *   onnxruntime (1.32): MLAS exp for every element; sin, cos: Eigen without FTZ, the last
 *     n % 4 elements through glibc; pow: glibc's powf.
 *   mlx (0.32, its CPU build): MLX's own exp, sin and cos for every element (its vector
 *     loops have no scalar tail; sin/cos of |x| > 2^23 call glibc inside the function);
 *     pow: glibc's powf (std::pow).
 *
 * Every profile pins glibc's FMA variants (the x86-64-v3 machines the frameworks were
 * measured on), so its bits are the same on any machine.
 */
#include "backends/backend.h"

#include <string.h>

#include "elem/bits.h"
#include "elem/fwmath.h"
#include "elem/glibcf.h"
#include "elem/powf.h"

#define FUSED 1

static int fw_check(const sinpe_bctx *ctx)
{
    (void)ctx;
    return 0;
}


/* The first element of a tensor of len elements that takes the scalar tail of a vector
 * loop of `width` lanes. */
static int64_t tail_start(int64_t len, int width)
{
    return len - len % width;
}

typedef float (*vec_fn)(float x, int flag);
typedef float (*lib_fn)(float x, int fused);

/* out[i] = f(in[i]) for elements e0 .. e0+n-1 of a tensor of len elements, those at or past
 * the tail's start by the C library; ftz: glibc run under FTZ/DAZ, which changes only
 * expf's subnormal results (flushed): sinf returns a tiny argument untouched (a subnormal
 * stays), cosf and expf of one give 1 (measured with TensorFlow 2.21 and jaxlib 0.10). */
static void with_tail(vec_fn vec, int flag, lib_fn lib, int ftz, int width, int64_t len,
                      int64_t e0, const float *in, float *out, size_t n)
{
    int64_t t = width > 1 ? tail_start(len, width) : len;
    for (size_t i = 0; i < n; i++) {
        float x = in[i];
        if (e0 + (int64_t)i < t)
            out[i] = vec(x, flag);
        else
            out[i] = ftz ? sinpe_flush_subnormal(lib(x, FUSED)) : lib(x, FUSED);
    }
}

/* Eigen's sin and cos (ftz: under FTZ/DAZ) of elements e0 .. e0+n-1 of a tensor of len
 * elements, the last len % width through glibc's sinf and cosf (s or c NULL: not wanted). */
static void eigen_sincos(int ftz, int width, int64_t len, int64_t e0, const float *a, float *s,
                         float *c, size_t n)
{
    if (s)
        with_tail(sinpe_eigen_sinf, ftz, sinpe_glibc_sinf, 0, width, len, e0, a, s, n);
    if (c)
        with_tail(sinpe_eigen_cosf, ftz, sinpe_glibc_cosf, 0, width, len, e0, a, c, n);
}

/* s[i] = sin(a[i]) and c[i] = cos(a[i]) by a C library's functions, every element (s or c
 * NULL: not wanted). */
static void lib_sincos(lib_fn sin_fn, lib_fn cos_fn, const float *a, float *s, float *c,
                       size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s)
            s[i] = sin_fn(a[i], FUSED);
        if (c)
            c[i] = cos_fn(a[i], FUSED);
    }
}

typedef float (*pow_fn)(float x, float y, int fused);

/* out[i] = f(base, y[i]), every element. */
static void lib_pow(pow_fn f, float base, const float *y, float *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = f(base, y[i], FUSED);
}

static void glibc_pow(const sinpe_bctx *ctx, float base, const float *y, float *out, int64_t e0,
                      int64_t n)
{
    (void)ctx;
    (void)e0;
    lib_pow(sinpe_powf_glibc, base, y, out, n);
}

/* A framework's table: every context suits it, the engine forms the angles. */
#define FW_BACKEND(indep, exp_fn, sincos_fn, pow_fn_)                                        \
    SINPE_BACKEND_OPS(indep, fw_check, exp_fn, sincos_fn, NULL, pow_fn_)

/* ---- numpy ---------------------------------------------------------------------------- */

static void numpy_exp(const sinpe_bctx *ctx, int64_t e0, const float *in, float *out, size_t n)
{
    (void)ctx;
    (void)e0;
    for (size_t i = 0; i < n; i++)
        out[i] = sinpe_numpy_expf(in[i]);
}

static void numpy_sincos(const sinpe_bctx *ctx, int64_t e0, const float *a, float *s, float *c,
                         size_t n)
{
    (void)e0;
    if (ctx->trig) /* NumPy 1.26 and 2.0 */
        lib_sincos(sinpe_numpy20_sinf, sinpe_numpy20_cosf, a, s, c, n);
    else
        lib_sincos(sinpe_numpy_sinf, sinpe_numpy_cosf, a, s, c, n);
}

const sinpe_backend_ops sinpe_backend_numpy = FW_BACKEND(1, numpy_exp, numpy_sincos, glibc_pow);

/* ---- tensorflow ------------------------------------------------------------------------ */

#define TF_WIDTH 8 /* Eigen's AVX float packet */

static void tf_exp(const sinpe_bctx *ctx, int64_t e0, const float *in, float *out, size_t n)
{
    with_tail(sinpe_eigen_expf, 1, sinpe_glibc_expf, 1, TF_WIDTH, ctx->exp_len, e0, in, out, n);
}

static void tf_sincos(const sinpe_bctx *ctx, int64_t e0, const float *a, float *s, float *c,
                      size_t n)
{
    eigen_sincos(1, TF_WIDTH, ctx->tensor_len, e0, a, s, c, n);
}

static void tf_pow(const sinpe_bctx *ctx, float base, const float *y, float *out, int64_t e0,
                   int64_t n)
{
    int64_t t = tail_start(ctx->tensor_len, TF_WIDTH);
    float (*eigen)(float, float, int) = ctx->trig ? sinpe_eigen219_powf : sinpe_eigen_powf;
    for (int64_t i = 0; i < n; i++)
        out[i] = e0 + i < t ? eigen(base, y[i], 1)
                            : sinpe_flush_subnormal(sinpe_powf_glibc_ftz(base, y[i], FUSED));
}

/* not independent: an element's function depends on where it lies (the tail) */
const sinpe_backend_ops sinpe_backend_tensorflow = FW_BACKEND(0, tf_exp, tf_sincos, tf_pow);

/* ---- jax ------------------------------------------------------------------------------- */

static float xla_exp(float x, int flag)
{
    (void)flag;
    return sinpe_xla_expf(x);
}

/* XLA's loop over an exp of a vector of fewer than 16 elements leaves the last n % 8 to
 * glibc's expf when they are 3, 5, 6 or 7 (measured with jaxlib 0.10.2 at every length to
 * 80 and at 127 to 4097: from 16 elements on, and for 1, 2 or 4 left over, every element is
 * XLA's: 4 is one 4-lane vector of XLA's polynomial).  An array of rank 2 or more has no
 * such tail (shapes (1, 3), (3, 5), (1, 11): every element XLA's). */
/* JAX 0.5 to 0.7 (variant 2): in each row of m elements along the last axis, with m >= 66
 * and m % 32 = 2 or 3, the two elements from m - m % 32 on are glibc's (measured with jax
 * 0.5.3, 0.6.2 and 0.7.2 at every length to 5000 and 882 shapes of rank 2 and 3). */
static int jax07_glibc(int64_t m, int64_t e)
{
    int64_t r = m % 32, k = e % m - (m - r);
    return m >= 66 && (r == 2 || r == 3) && (k == 0 || k == 1);
}

static void jax_exp(const sinpe_bctx *ctx, int64_t e0, const float *in, float *out, size_t n)
{
    int64_t len = ctx->exp_len;
    int64_t t = ctx->exp_ndim <= 1 && len < 16 && len % 8 >= 3 && len % 8 != 4 && !ctx->trig
                    ? tail_start(len, 8) : len;
    for (size_t i = 0; i < n; i++) {
        int64_t e = e0 + (int64_t)i;
        int lib = ctx->trig == 2 ? jax07_glibc(ctx->exp_last, e) : e >= t;
        out[i] = lib ? sinpe_flush_subnormal(sinpe_glibc_expf(in[i], FUSED)) : xla_exp(in[i], 0);
    }
}

static void jax_sincos(const sinpe_bctx *ctx, int64_t e0, const float *a, float *s, float *c,
                       size_t n)
{
    (void)ctx;
    (void)e0;
    lib_sincos(sinpe_glibc_sinf, sinpe_glibc_cosf, a, s, c, n);
}

static void jax_pow(const sinpe_bctx *ctx, float base, const float *y, float *out, int64_t e0,
                    int64_t n)
{
    (void)ctx;
    (void)e0;
    lib_pow(sinpe_powf_glibc_ftz, base, y, out, n);
}

const sinpe_backend_ops sinpe_backend_jax = FW_BACKEND(1, jax_exp, jax_sincos, jax_pow);

/* ---- onnxruntime ----------------------------------------------------------------------- */

#define ORT_WIDTH 4 /* Eigen's SSE float packet */

static void ort_exp(const sinpe_bctx *ctx, int64_t e0, const float *in, float *out, size_t n)
{
    (void)ctx;
    (void)e0;
    for (size_t i = 0; i < n; i++)
        out[i] = sinpe_mlas_expf(in[i], FUSED);
}

static void ort_sincos(const sinpe_bctx *ctx, int64_t e0, const float *a, float *s, float *c,
                       size_t n)
{
    eigen_sincos(0, ORT_WIDTH, ctx->tensor_len, e0, a, s, c, n);
}

/* not independent: sin/cos have the tail */
const sinpe_backend_ops sinpe_backend_onnxruntime = FW_BACKEND(0, ort_exp, ort_sincos, glibc_pow);

/* ---- mlx ------------------------------------------------------------------------------- */

static void mlx_exp(const sinpe_bctx *ctx, int64_t e0, const float *in, float *out, size_t n)
{
    (void)ctx;
    (void)e0;
    for (size_t i = 0; i < n; i++)
        out[i] = sinpe_mlx_expf(in[i]);
}

static float mlx_sin(float x, int fused)
{
    (void)fused;
    return sinpe_mlx_sinf(x);
}

static float mlx_cos(float x, int fused)
{
    (void)fused;
    return sinpe_mlx_cosf(x);
}

static void mlx_sincos(const sinpe_bctx *ctx, int64_t e0, const float *a, float *s, float *c,
                       size_t n)
{
    (void)ctx;
    (void)e0;
    lib_sincos(mlx_sin, mlx_cos, a, s, c, n);
}

const sinpe_backend_ops sinpe_backend_mlx = FW_BACKEND(1, mlx_exp, mlx_sincos, glibc_pow);
