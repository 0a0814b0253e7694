/* The 'sleef' backend: torch on 64-bit Arm, bit for bit, on any machine.
 *
 * torch's float32 sin, cos and exp there call SLEEF (elem/sleef.c re-implements its
 * functions; docs/backends.md).  Its sin and cos choose their reduction per vector: one
 * lane that needs the long path sends every lane of the vector down it, so a result
 * depends on the other elements of its vector.  torch forms the vectors so: at::parallel_for
 * splits the n elements of an op over min(threads, ceil(n / 2048)) chunks of
 * ceil(n / chunks) elements (grain 2048: aten/src/ATen/ParallelOpenMP.h and the unary
 * kernels of aten/src/ATen/native/cpu/UnaryOpsKernel.cpp), and at::vec::map loads each
 * chunk in vectors of `lanes` elements from its start, the last one zero-padded.  Here each
 * group of elements torch loads together is evaluated on the largest path any of them
 * needs; elements of a group outside the caller's block are read through the context's
 * argument function.  exp is lane-independent; pow is torch's aarch64 float32 pow
 * (elem/powf.h: SLEEF for whole pairs of vectors, glibc's fused powf for the rest).
 */
#include "backends/backend.h"

#include "elem/powf.h"
#include "elem/sleef.h"

static int sleef_check(const sinpe_bctx *ctx)
{
    int trig_ok = ctx->trig == SINPE_SLEEF_U10 || ctx->trig == SINPE_SLEEF_U35;
    return trig_ok && (ctx->lanes == 4 || ctx->lanes == 8) && ctx->torch_threads >= 1 ? 0 : 1;
}

int64_t sinpe_sleef_chunk(int64_t n, int threads)
{
    if (n <= 2048 || threads <= 1)
        return n > 0 ? n : 1;
    int64_t pieces = n / 2048 + (n % 2048 != 0);
    int64_t t = pieces < threads ? pieces : threads;
    return n / t + (n % t != 0);
}

static void sleef_exp(const sinpe_bctx *ctx, int64_t e0, const float *in, float *out, size_t n)
{
    (void)ctx;
    (void)e0;
    sinpe_sleef_exp(in, out, n);
}

/* The group of torch's vector around element e: [*gs, *ge), and the largest path its
 * elements need (those in a[], elements e0 .. e0+n-1, read there; padding lanes are 0). */
static int group_path(const sinpe_bctx *ctx, int64_t chunk, int64_t e, int64_t e0,
                      const float *a, int64_t n, int64_t *gs, int64_t *ge)
{
    int64_t c0 = e / chunk * chunk;
    int64_t cend = c0 + chunk < ctx->tensor_len ? c0 + chunk : ctx->tensor_len;
    *gs = c0 + (e - c0) / ctx->lanes * ctx->lanes;
    *ge = *gs + ctx->lanes < cend ? *gs + ctx->lanes : cend;
    int path = 0;
    for (int64_t f = *gs; f < *ge; f++) {
        float arg = f >= e0 && f < e0 + n ? a[f - e0] : ctx->argument(ctx->src, f);
        int q = sinpe_sleef_path((sinpe_sleef_trig)ctx->trig, arg);
        path = q > path ? q : path;
    }
    return path;
}

static void sleef_sincos(const sinpe_bctx *ctx, int64_t e0, const float *a, float *s, float *c,
                         size_t n)
{
    int64_t chunk = sinpe_sleef_chunk(ctx->tensor_len, ctx->torch_threads);
    for (int64_t i = 0; i < (int64_t)n;) {
        int64_t gs, ge;
        int path = group_path(ctx, chunk, e0 + i, e0, a, (int64_t)n, &gs, &ge);
        int64_t end = ge - e0 < (int64_t)n ? ge - e0 : (int64_t)n;
        sinpe_sleef_sincos((sinpe_sleef_trig)ctx->trig, path, a + i, s ? s + i : NULL,
                           c ? c + i : NULL, (size_t)(end - i));
        i = end;
    }
}

static void sleef_pow(const sinpe_bctx *ctx, float base, const float *y, float *out, int64_t e0,
                      int64_t n)
{
    sinpe_pow_profile prof = { ctx->lanes, 0, 1, 0, ctx->torch_threads };
    sinpe_torch_powf(base, y, out, e0, n, ctx->tensor_len, &prof);
}

/* not independent: SLEEF's vectors couple lanes */
const sinpe_backend_ops sinpe_backend_sleef =
    SINPE_BACKEND_OPS(0, sleef_check, sleef_exp, sleef_sincos, NULL, sleef_pow);
