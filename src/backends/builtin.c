/* The built-in backend: the correctly rounded kernels (elem/crmath.h) on the call's code
 * path.  The same bits on every machine and path. */
#include "backends/backend.h"

#include "elem/crmath.h"

#define BLOCK 2048

static int builtin_check(const sinpe_bctx *ctx)
{
    return ctx->path ? 0 : 1;
}

static void builtin_exp(const sinpe_bctx *ctx, int64_t e0, const float *in, float *out,
                        size_t n)
{
    (void)ctx;
    (void)e0;
    for (size_t i = 0; i < n; i++)
        out[i] = sinpe_expf(in[i]);
}

/* Through the path's block sin/cos, so that every use exercises the path the tables use. */
static void builtin_sincos(const sinpe_bctx *ctx, int64_t e0, const float *a, float *s,
                           float *c, size_t n)
{
    (void)e0;
    float other[BLOCK];
    for (size_t i = 0; i < n; i += BLOCK) {
        size_t m = n - i < BLOCK ? n - i : BLOCK;
        ctx->path->sincos(a + i, s ? s + i : other, c ? c + i : other, m);
    }
}

static void builtin_rows(const sinpe_bctx *ctx, float *out, ptrdiff_t ostride, const float *pos,
                         int64_t first_row, int64_t nrows, const float *div, int64_t half,
                         float dmin, float dmax)
{
    ctx->path->rows(out, ostride, pos, first_row, nrows, div, half, dmin, dmax);
}

static void builtin_pow(const sinpe_bctx *ctx, float base, const float *y, float *out,
                        int64_t e0, int64_t n)
{
    (void)ctx;
    (void)e0;
    for (int64_t i = 0; i < n; i++)
        out[i] = sinpe_powf_cr(base, y[i]);
}

const sinpe_backend_ops sinpe_backend_builtin = SINPE_BACKEND_OPS(
    1, builtin_check, builtin_exp, builtin_sincos, builtin_rows, builtin_pow);
